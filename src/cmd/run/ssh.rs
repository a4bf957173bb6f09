//! Step 4b, when the policy names ssh keys (`policy::ssh`): the session's filtered agent
//! started (`netproxy::agent`) on a socket in a private directory of the session's, the
//! one host socket granted; what of the user's ssh files the program may read revealed,
//! and `config`'s private keys denied; and `ssh` inside made to go through the proxy with
//! that agent, through a wrapper first on `PATH` and in `GIT_SSH`.
//!
//! The model: the program's ssh sees your `known_hosts` and `config` as they were at the
//! start, reaches the hosts the allow-list names through the proxy, and signs through an
//! agent that passes only the named keys, for the named hosts' keys, and git signatures
//! when allowed. Your agent's socket, your private keys and every other key stay out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::messages;
use super::prepare::Plan;
use crate::netproxy::agent::{self, judge, known_hosts};
use crate::netproxy::session::ProxySession;
use crate::policy::ssh::{KeyRef, Ssh};
use crate::sandbox::Backend;
use crate::session::journal::Journal;
use crate::session::pty::ask;
use crate::sys::exit::Failure;
use crate::sys::say::Verbosity;

/// The session's ssh pieces: its directory (removed at the end; its lock held meanwhile)
/// and the variables the program gets.
pub(super) struct SshSession {
    _dir: crate::session::claim::Claim,
    pub(super) env: Vec<(String, OsString)>,
}

/// The longest socket path a `sockaddr_un` holds, with its NUL.
const SUN_PATH: usize = 108;

pub(super) fn start(
    plan: &mut Plan,
    backend: &Backend,
    net: Option<&ProxySession>,
    journal: &Journal,
    say: Verbosity,
) -> Result<(Option<SshSession>, Option<ask::Desk>), Failure> {
    let Some(ssh) = plan.policy.ssh.clone() else {
        return Ok((None, None));
    };
    let upstream = std::env::var_os("SSH_AUTH_SOCK")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .ok_or_else(messages::no_ssh_agent)?;
    let held =
        agent::identities(&upstream).map_err(|e| messages::ssh_agent_silent(&upstream, e))?;
    let rules = rules(&ssh, &held, say)?;
    let claim = super::sessiondir::make(&plan.home, "ssh")?;
    let dir = claim.path().to_path_buf();
    let mut session = SshSession {
        _dir: claim,
        env: Vec::new(),
    };
    let socket = dir.join("agent.sock");
    if socket.as_os_str().len() >= SUN_PATH {
        return Err(messages::ssh_socket_too_long(&socket).into());
    }
    let (asker, desk) = match ssh.confirm {
        true => {
            let (asker, desk) = ask::pair().context("cannot set up the confirmations")?;
            (Some(asker), Some(desk))
        }
        false => (None, None),
    };
    agent::serve(
        &socket,
        agent::AgentFilter {
            rules,
            upstream,
            refusals: journal.sink(),
            ask: asker.map(|a| -> agent::Ask { std::sync::Arc::new(move |q: &str| a.ask(q)) }),
        },
    )
    .with_context(|| format!("cannot start the ssh agent at {}", socket.display()))?;
    say.detail(&format!(
        "sbx-shell: ssh: the agent at {} passes {} key(s){}",
        socket.display(),
        ssh.keys.len(),
        if ssh.sign_commits {
            ", and signs git commits"
        } else {
            ""
        }
    ));
    if matches!(backend, Backend::Bwrap { .. }) {
        make_views(plan, &dir, say);
    }
    let fs = &mut plan.policy.filesystem;
    fs.own_sockets.push(socket.clone());
    session.env = environment(&socket, &dir, backend, &plan.policy, net)?;
    Ok((Some(session), desk))
}

/// The filter's rules: each named key found (a file read, a fingerprint looked up in the
/// agent), its hosts' keys from `known_hosts`. A key the agent lacks, or a host
/// `known_hosts` does not list, is said at the start: logins with it will be refused.
fn rules(
    ssh: &Ssh,
    held: &[(Vec<u8>, Vec<u8>)],
    say: Verbosity,
) -> Result<judge::AgentRules, Failure> {
    let known_text: String = ssh
        .known_hosts
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect::<Vec<_>>()
        .join("\n");
    let mut keys = Vec::new();
    for k in &ssh.keys {
        let blob = match &k.key {
            KeyRef::File(path) => public_key_file(path)?,
            KeyRef::Fingerprint(fp) => {
                match held.iter().find(|(b, _)| judge::fingerprint(b) == *fp) {
                    Some((b, _)) => b.clone(),
                    None => {
                        say.note(&messages::ssh_key_not_held(fp));
                        continue;
                    }
                }
            }
        };
        let fingerprint = judge::fingerprint(&blob);
        if !held.iter().any(|(b, _)| *b == blob) {
            say.note(&messages::ssh_key_cannot_sign(&k.key, &fingerprint));
        }
        let mut host_keys = Vec::new();
        for host in &k.hosts {
            let found =
                known_hosts::keys_for(&known_text, &known_hosts::spelling(&host.name, host.port));
            let elsewhere = match host.port {
                None => known_hosts::other_ports(&known_text, &host.name),
                Some(_) => Vec::new(),
            };
            if found.is_empty() && !elsewhere.is_empty() {
                say.note(&messages::ssh_host_on_other_ports(
                    host,
                    &fingerprint,
                    &k.key,
                    &host.name,
                    &elsewhere,
                ));
            } else if found.is_empty() {
                say.note(&messages::ssh_host_unknown(host, &fingerprint));
            }
            host_keys.extend(found);
        }
        keys.push(judge::Key {
            blob,
            fingerprint,
            hosts: k.hosts.iter().map(ToString::to_string).collect(),
            host_keys,
        });
    }
    let mut known = known_hosts::named(&known_text);
    for (k, key) in ssh.keys.iter().zip(&keys) {
        for (host, blobs) in k.hosts.iter().map(|h| (h, &key.host_keys)) {
            for b in blobs {
                known.push((
                    b.clone(),
                    vec![known_hosts::spelling(&host.name, host.port)],
                ));
            }
        }
    }
    // The policy's names first: a hashed known_hosts entry has no other.
    known.reverse();
    Ok(judge::AgentRules {
        keys,
        sign_commits: ssh.sign_commits,
        confirm: ssh.confirm,
        known,
    })
}

/// A public key file's key blob, or the error naming the file and the fix.
fn public_key_file(path: &Path) -> Result<Vec<u8>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| messages::not_a_public_key(path, e))?;
    let key = ssh_key::PublicKey::from_openssh(text.trim())
        .map_err(|e| messages::not_a_public_key(path, format_args!("not a public key ({e})")))?;
    Ok(key
        .to_bytes()
        .map_err(|e| messages::not_a_public_key(path, e))?)
}

/// Under bwrap: a copy of what the policy reveals inside each denied directory (the ssh
/// client's files in `~/.ssh`), in the session's directory, shown in that directory's
/// place (`How::View`). Landlock alone and Seatbelt read the files themselves.
fn make_views(plan: &mut Plan, dir: &Path, say: Verbosity) {
    let fs = &mut plan.policy.filesystem;
    let view = dir.join("view");
    for path in &fs.revealed {
        let Some(denied) = fs.denied.iter().find(|d| path.real().starts_with(d.real())) else {
            continue;
        };
        let root = denied.real().to_path_buf();
        let Ok(rel) = path.real().strip_prefix(&root) else {
            continue;
        };
        let copy = view.join(rel);
        let copied = copy
            .parent()
            .map_or(Ok(()), crate::sys::files::create_private_dir)
            .and_then(|()| std::fs::copy(path.real(), &copy).map(|_| ()));
        match copied {
            Ok(()) if !fs.views.iter().any(|(p, _)| *p == root) => {
                fs.views.push((root, view.clone()));
            }
            Ok(()) => {}
            Err(e) => say.detail(&format!(
                "sbx-shell: ssh: cannot copy {}: {e}",
                path.path.display()
            )),
        }
    }
}

/// `SSH_AUTH_SOCK`, and the wrapper first on `PATH` and in `GIT_SSH`: ssh with the
/// session's agent and, where the session has a proxy, through it.
fn environment(
    socket: &Path,
    dir: &Path,
    backend: &Backend,
    policy: &crate::policy::Policy,
    net: Option<&ProxySession>,
) -> Result<Vec<(String, OsString)>, Failure> {
    let mut env = vec![("SSH_AUTH_SOCK".to_string(), socket.as_os_str().to_owned())];
    let Some(ssh) = find_on_path("ssh") else {
        return Ok(env);
    };
    let proxy = net
        .and_then(|n| n.port)
        .map(|port| format!("127.0.0.1:{port}"));
    let bin = dir.join("bin");
    crate::sys::files::create_private_dir(&bin)
        .context("cannot create the ssh wrapper's directory")?;
    let exe = exe_inside(backend, policy, &bin)?;
    let wrapper = bin.join("ssh");
    std::fs::write(&wrapper, wrapper_script(&ssh, &exe, proxy.as_deref()))
        .context("cannot write the ssh wrapper")?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
        .context("cannot make the ssh wrapper executable")?;
    let mut path = bin.into_os_string();
    if let Some(inherited) = std::env::var_os("PATH") {
        path.push(":");
        path.push(inherited);
    }
    env.push(("PATH".into(), path));
    env.push(("GIT_SSH".into(), wrapper.into_os_string()));
    Ok(env)
}

/// The sbx-shell executable as the program can run it (for `ProxyCommand`): under bwrap
/// the bind at `HELPER_PATH`, in a container the mount at `container::EXE`; elsewhere its
/// own path, unless the sandbox does not show that path (a binary under `/tmp` with
/// Landlock alone, one in a denied path, one deleted by an upgrade): then a copy in the
/// session's directory.
fn exe_inside(
    backend: &Backend,
    policy: &crate::policy::Policy,
    bin: &Path,
) -> Result<PathBuf, Failure> {
    match backend {
        Backend::Bwrap { .. } => return Ok(PathBuf::from(crate::sandbox::bwrap::HELPER_PATH)),
        Backend::Container(_) => return Ok(PathBuf::from(crate::sandbox::container::EXE)),
        _ => {}
    }
    let exe = std::env::current_exe().context("cannot locate the sbx-shell executable")?;
    let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
    let private = backend.landlock_alone()
        && crate::sandbox::landlock::HOST_PRIVATE
            .iter()
            .any(|p| exe.starts_with(p));
    let denied = policy
        .filesystem
        .denied
        .iter()
        .any(|d| exe.starts_with(d.real()));
    if !private && !denied && exe.is_file() {
        return Ok(exe);
    }
    let source = match Path::new("/proc/self/exe").exists() {
        true => PathBuf::from("/proc/self/exe"),
        false => exe,
    };
    let copy = bin.join("sbx-shell");
    std::fs::copy(&source, &copy).context("cannot copy sbx-shell for ssh's ProxyCommand")?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))
        .context("cannot make the copy of sbx-shell executable")?;
    Ok(copy)
}

/// The wrapper: the real ssh with the session's agent and, with `proxy`, the tunnel.
pub(super) fn wrapper_script(ssh: &Path, exe: &Path, proxy: Option<&str>) -> String {
    let q = |s: &str| crate::policy::refusal::shell_word(s);
    let mut options = Vec::new();
    if let Some(proxy) = proxy {
        let command = format!(
            "ProxyCommand={} {} {proxy} %h %p",
            q(&exe.display().to_string()),
            crate::netproxy::connect::CONNECT_ARG
        );
        options.push(format!("-o {}", q(&command)));
    }
    options.push("-o IdentityAgent=SSH_AUTH_SOCK".into());
    format!(
        "#!/bin/sh\n# sbx-shell: ssh with this session's agent{}; host keys checked as you configured.\nexec {} {} \"$@\"\n",
        if proxy.is_some() { ", through its proxy" } else { "" },
        q(&ssh.display().to_string()),
        options.join(" ")
    )
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    use crate::policy::shell::ShellProbe;
    let system = crate::policy::program::System::default();
    crate::policy::program::find_in_path(
        Path::new(name),
        std::env::var_os("PATH").as_deref(),
        |p| system.is_executable(p),
    )
    .filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_adds_the_tunnel_and_the_agent() {
        let s = wrapper_script(
            Path::new("/usr/bin/ssh"),
            Path::new("/dev/.sbx-shell"),
            Some("127.0.0.1:3128"),
        );
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("exec /usr/bin/ssh -o 'ProxyCommand=/dev/.sbx-shell __sbx_connect 127.0.0.1:3128 %h %p' -o IdentityAgent=SSH_AUTH_SOCK \"$@\"\n"), "{s}");
        let s = wrapper_script(Path::new("/usr/bin/ssh"), Path::new("/x y/sbx"), None);
        assert!(
            s.contains("exec /usr/bin/ssh -o IdentityAgent=SSH_AUTH_SOCK \"$@\""),
            "{s}"
        );
    }
}
