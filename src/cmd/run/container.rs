//! A container session's wiring on the host (`sandbox::container` builds the engine's
//! argv, `helper::container` is the courier and the entry): the engine asked whether it
//! answers, can enforce the limits asked and has the image before the terminal is touched
//! (the image of the host's links made when missing), and the session's place — its name, the courier's directory, who the
//! program runs as, what of the host is mounted — kept until the session ends.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};

use super::messages;
use crate::sandbox::container;
use crate::sandbox::{Container, ContainerLaunch};
use crate::sys::exit::Failure;

/// Variables the engine's client reads to find its engine, its configuration and its
/// storage: passed to it, never to the program unless the policy passes them.
const CLIENT_VARS: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "REGISTRY_AUTH_FILE",
];
const CLIENT_PREFIXES: &[&str] = &["DOCKER_", "CONTAINER_", "CONTAINERS_", "PODMAN_"];

/// Step 3 for a container backend: the engine answers and has the image; the image of
/// the host's symlinks is made when it is the one missing. Errors name what the client
/// said and the fix.
pub(super) fn ready(
    container: &Container,
    image: Option<&str>,
    limits: &crate::policy::Limits,
    home: &Path,
) -> Result<(), Failure> {
    if let Some(error) = container::remote(container.engine, &endpoint(container)?) {
        return Err(anyhow!(error).into());
    }
    let memory = limits.session_memory_mib.is_some();
    let pids = limits.session_processes.is_some();
    if memory || pids {
        let info = match run_client_output(&container::info_argv(container))? {
            Ok(info) => info,
            Err(said) => {
                return Err(anyhow!(container::client_error(container.engine, "", &said)).into())
            }
        };
        if let Some(error) = container::unenforced(container.engine, &info, memory, pids) {
            return Err(anyhow!(error).into());
        }
    }
    let (_, links) = crate::host::root::entries().context("cannot list /")?;
    let host_image = container::host_image(&links);
    let name = image.unwrap_or(&host_image);
    let said = match run_client(&container::inspect_argv(container, name), None)? {
        Ok(()) => return Ok(()),
        Err(said) => said,
    };
    let error = container::client_error(container.engine, name, &said);
    if image.is_some() || !error.contains("pull or build") {
        return Err(anyhow!(error).into());
    }
    let archive = links_archive(&links, home)?;
    match run_client(&container::import_argv(container, name), Some(archive))? {
        Ok(()) => Ok(()),
        Err(said) => Err(anyhow!(container::client_error(container.engine, name, &said)).into()),
    }
}

/// Where the engine is, as its client finds it (`container::endpoint_argv`); empty when
/// the client does not say (one without contexts: its own errors speak then) and for
/// Docker's default context, which is this machine's socket. The client is asked only
/// when a context is chosen (`DOCKER_CONTEXT`, `currentContext` in its config).
fn endpoint(container: &Container) -> Result<String, Failure> {
    if container.engine == crate::sandbox::Engine::Docker {
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            return Ok(host);
        }
        if std::env::var_os("DOCKER_CONTEXT").is_none() && !docker_context_chosen() {
            return Ok(String::new());
        }
    }
    let Some(argv) = container::endpoint_argv(container) else {
        let named_remote = container
            .cli
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with("-remote"));
        let host = std::env::var("CONTAINER_HOST").unwrap_or_default();
        return Ok(match named_remote && host.is_empty() {
            true => "remote".into(),
            false => host,
        });
    };
    Ok(run_client_output(&argv)?.unwrap_or_default())
}

/// Whether Docker's client config (`$DOCKER_CONFIG/config.json`, else
/// `~/.docker/config.json`) names a current context other than the default.
fn docker_context_chosen() -> bool {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")));
    let Some(text) = dir.and_then(|d| std::fs::read_to_string(d.join("config.json")).ok()) else {
        return false;
    };
    let config: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    config
        .get("currentContext")
        .and_then(|c| c.as_str())
        .is_some_and(|c| !c.is_empty() && c != "default")
}

/// A tar archive of `links` at its top, made by the host's `tar` in a directory of the
/// state directory's.
fn links_archive(links: &[(String, PathBuf)], home: &Path) -> Result<Vec<u8>, Failure> {
    let dir = crate::sys::files::state_dir(home)
        .join("containers")
        .join(format!("image-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let made = links
        .iter()
        .try_for_each(|(name, target)| std::os::unix::fs::symlink(target, dir.join(name)));
    let out = made.and_then(|()| {
        std::process::Command::new("tar")
            .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
            .arg(&dir)
            .args(["-cf", "-", "."])
            .stderr(std::process::Stdio::null())
            .output()
    });
    let _ = std::fs::remove_dir_all(&dir);
    match out {
        Ok(out) if out.status.success() => Ok(out.stdout),
        Ok(_) => Err(anyhow!("tar could not archive the host's links at /").into()),
        Err(e) => Err(messages::links_image_not_made(e).into()),
    }
}

/// Run the engine's client with `input` on its stdin: `Ok(Err(what it said))` when it
/// failed.
fn run_client(argv: &[OsString], input: Option<Vec<u8>>) -> Result<Result<(), String>, Failure> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(client_env())
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", argv[0].to_string_lossy()))?;
    if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
        let _ = stdin.write_all(&bytes);
    }
    let out = child
        .wait_with_output()
        .with_context(|| format!("cannot run {}", argv[0].to_string_lossy()))?;
    Ok(match out.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    })
}

/// Run the engine's client: `Ok(Ok(what it printed))`, or `Ok(Err(what it said))` when it
/// failed.
fn run_client_output(argv: &[OsString]) -> Result<Result<String, String>, Failure> {
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(client_env())
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", argv[0].to_string_lossy()))?;
    Ok(match out.status.success() {
        true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    })
}

/// The variables the engine's client reads, for the courier to give it (`VAR=VALUE\0…`,
/// through a pipe: a `DOCKER_*` variable may hold a secret, and command lines are
/// everyone's to read).
pub(super) fn client_env_bytes() -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    client_env()
        .into_iter()
        .flat_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            kv.push(0);
            kv
        })
        .collect()
}

/// This process's variables that the engine's client reads.
fn client_env() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(k, _)| {
            k.to_str().is_some_and(|k| {
                CLIENT_VARS.contains(&k) || CLIENT_PREFIXES.iter().any(|p| k.starts_with(p))
            })
        })
        .collect()
}

/// The session's place for its container: removed (the courier's directory) when dropped.
pub(super) struct ContainerPlace {
    container: Container,
    name: String,
    /// The courier's directory, `state/containers/NAME` (`session::claim`).
    dir: crate::session::claim::Claim,
    socket: PathBuf,
    exe: PathBuf,
    user: (u32, u32, Vec<u32>),
    cwd: PathBuf,
    top: Vec<PathBuf>,
    host_image: String,
    resolv_conf: Option<PathBuf>,
}

impl ContainerPlace {
    /// `name_server`: the sandbox's name server is there (`netproxy::lookups`), so its
    /// `resolv.conf` is written here.
    pub(super) fn make(
        container: &Container,
        home: &Path,
        cwd: &Path,
        name_server: bool,
    ) -> Result<ContainerPlace, Failure> {
        let exe = std::fs::read_link("/proc/self/exe")
            .context("cannot find the sbx-shell executable (/proc/self/exe)")?;
        if exe.to_string_lossy().ends_with(" (deleted)") {
            return Err(messages::executable_replaced().into());
        }
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let name = format!("sbx-shell-{}-{}", std::process::id(), started.as_nanos());
        let containers = crate::sys::files::state_dir(home).join("containers");
        // Those of sessions whose sbx-shell is gone (killed: nothing removed them) are
        // swept. A new directory of the session's own: one already there (planted, or a
        // name reused) is never taken, with whatever it holds at the socket's name.
        let shared = crate::session::claim::Claims::beside(
            &containers,
            "sbx-shell-",
            crate::session::claim::remove_tree,
        );
        let made = crate::sys::files::create_private_dir(&containers).and_then(|()| {
            shared.take(&name, &|dir| {
                std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
                    .create(dir)
            })
        });
        let claim =
            made.with_context(|| format!("cannot create {}", containers.join(&name).display()))?;
        let dir = claim.path().to_path_buf();
        let (top, links) = crate::host::root::entries().context("cannot list /")?;
        let resolv_conf = match name_server {
            true => {
                let path = dir.join(container::RESOLV_CONF_NAME);
                std::fs::write(&path, crate::netproxy::lookups::RESOLV_CONF)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Some(path)
            }
            false => None,
        };
        Ok(ContainerPlace {
            resolv_conf,
            container: container.clone(),
            name,
            socket: dir.join(container::SOCKET_NAME),
            dir: claim,
            exe,
            user: crate::host::root::ids(),
            cwd: cwd.to_path_buf(),
            top,
            host_image: container::host_image(&links),
        })
    }

    /// What the engine's argv takes of the session.
    pub(super) fn launch(&self) -> ContainerLaunch<'_> {
        ContainerLaunch {
            name: &self.name,
            user: (self.user.0, self.user.1, &self.user.2),
            exe: &self.exe,
            socket: &self.socket,
            cwd: &self.cwd,
            top: &self.top,
            host_image: &self.host_image,
            resolv_conf: self.resolv_conf.as_deref(),
        }
    }

    /// Each writable path the engine will mount for `policy` (`container::bind_mounts`),
    /// and the directory there now, for the helper to find again inside
    /// (`HelperSpec::mounted`). A path that is a symlink now, or gone, is refused here.
    pub(super) fn mounted(
        &self,
        policy: &crate::policy::Policy,
        session_dirs: &[Option<&Path>],
    ) -> Result<Vec<(PathBuf, crate::sys::files::Identity)>, Failure> {
        let session_dirs: Vec<&Path> = session_dirs.iter().flatten().copied().collect();
        container::bind_mounts(policy, &self.top, &session_dirs)
            .into_iter()
            .filter(|(_, writable)| *writable)
            .map(|(path, _)| match crate::sys::files::identity_of(&path) {
                Some(id) => Ok((path, id)),
                None => Err(messages::place_changed(&path).into()),
            })
            .collect()
    }

    /// The courier's argv around the engine's (`helper::container`).
    pub(super) fn courier_argv(
        &self,
        exe: &Path,
        client_env: std::os::fd::RawFd,
        lifeline: std::os::fd::RawFd,
        engine: Vec<OsString>,
    ) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![
            exe.as_os_str().to_owned(),
            container::COURIER_ARG.into(),
            self.dir.path().as_os_str().to_owned(),
            self.name.clone().into(),
            client_env.to_string().into(),
            lifeline.to_string().into(),
            "--".into(),
        ];
        argv.extend(engine);
        argv
    }
}

impl Drop for ContainerPlace {
    /// The container removed, unless the courier saw its client end by itself (the
    /// courier was killed: its container may be left created); then the courier's
    /// directory (the entry's own drop).
    fn drop(&mut self) {
        if !self.dir.path().join(container::ENDED_NAME).exists() {
            let argv = container::remove_argv(&self.container, &self.name);
            let _ = run_client(&argv, None);
        }
    }
}
