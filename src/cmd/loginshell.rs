//! `sbx-shell login-shell`: make sbx-shell an account's login shell in one command. It
//! records the real shell in that account's config (`"shell"`: once sbx-shell is the login
//! shell, `$SHELL` and the passwd entry name sbx-shell, and only the config still knows the
//! real one), makes sure `/etc/shells` lists sbx-shell (chsh and some daemons refuse a
//! shell it does not list), and runs chsh. Each step is shown first and needs consent.

use super::messages;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, Context as _};

use super::setup::{as_root, consent};
use crate::policy::profiles;
use crate::policy::program;
use crate::policy::shell;
use crate::sys::exit::{self, Failure};

const ETC_SHELLS: &str = "/etc/shells";
const CHSH: &str = "/usr/bin/chsh";
const COMMAND: &str = "login-shell";

/// One change, shown before it is made.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Record { config: PathBuf, text: String },
    ListInEtcShells { exe: PathBuf },
    Chsh { user: String, exe: PathBuf },
}

impl Step {
    fn describe(&self) -> String {
        match self {
            Step::Record { config, .. } => {
                format!("record the real shell in {}", config.display())
            }
            Step::ListInEtcShells { exe } => format!("add {} to {ETC_SHELLS}", exe.display()),
            Step::Chsh { user, exe } => format!("chsh -s {} {user}", exe.display()),
        }
    }
}

struct Account {
    name: String,
    uid: u32,
    gid: u32,
    home: PathBuf,
    shell: PathBuf,
    /// Another account than the caller's (root's `--user`).
    other: bool,
}

pub fn main(
    shell_arg: Option<&Path>,
    user: Option<&str>,
    yes: bool,
    print: bool,
) -> Result<u8, Failure> {
    let account = account(user)?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this executable")?;
    let (config, existing) = read_config(&account)?;
    let recorded = existing
        .as_deref()
        .and_then(|t| crate::policy::config::from_str(t, "").ok())
        .and_then(|c| c.shell);
    let real = real_shell(shell_arg, recorded, &account)?;
    let steps = plan_steps(&account, &exe, &config, existing.as_deref(), &real)?;
    let mut report = format!(
        "sbx-shell {COMMAND}: {} logs in through {}, which runs {}\n",
        account.name,
        exe.display(),
        real.display()
    );
    if exe.starts_with("/tmp") || exe.starts_with(&account.home) {
        report.push_str(&messages::install_first(&exe, COMMAND));
    }
    if steps.is_empty() {
        report.push_str("nothing to change: already set up\n");
        crate::sys::say::write_stdout(report.as_bytes())?;
        return Ok(0);
    }
    for step in &steps {
        let verb = if print { "would" } else { "will" };
        report.push_str(&format!("{verb} {}\n", step.describe()));
    }
    crate::sys::say::write_stdout(report.as_bytes())?;
    if print {
        return Ok(0);
    }
    if !yes && !consent(COMMAND)? {
        crate::sys::say::write_stdout(b"nothing changed\n")?;
        return Ok(exit::FAILURE);
    }
    let root = nix::unistd::geteuid().is_root();
    for step in &steps {
        apply(step, &account, root)?;
    }
    crate::sys::say::write_stdout(
        format!(
            "done: the next login of {} runs {} inside sbx-shell (your current session is unchanged)\n",
            account.name,
            real.display()
        )
        .as_bytes(),
    )
}

/// The account's config file, and its text when it has one.
fn read_config(account: &Account) -> Result<(PathBuf, Option<String>), Failure> {
    let config_dir = if account.other {
        profiles::config_dir(None, &account.home)
    } else {
        crate::cmd::inputs::config_dir(&account.home)
    };
    let config = config_dir.join(profiles::CONFIG_FILE);
    let existing = match std::fs::read_to_string(&config) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(anyhow!("cannot read {}: {e}", config.display()).into()),
    };
    Ok((config, existing))
}

/// What is left to do: record the real shell in the account's `config` (`existing`: its
/// text), list sbx-shell in /etc/shells, chsh.
fn plan_steps(
    account: &Account,
    exe: &Path,
    config: &Path,
    existing: Option<&str>,
    real: &Path,
) -> Result<Vec<Step>, Failure> {
    let mut steps = Vec::new();
    if let Some(text) = with_shell(existing, real, config)? {
        steps.push(Step::Record {
            config: config.to_path_buf(),
            text,
        });
    }
    let listed = std::fs::read_to_string(ETC_SHELLS).unwrap_or_default();
    if !lists(&listed, exe) {
        steps.push(Step::ListInEtcShells {
            exe: exe.to_path_buf(),
        });
    }
    if account.shell != exe {
        steps.push(Step::Chsh {
            user: account.name.clone(),
            exe: exe.to_path_buf(),
        });
    }
    Ok(steps)
}

fn account(user: Option<&str>) -> Result<Account, Failure> {
    let me = nix::unistd::getuid();
    let entry = match user {
        Some(name) => {
            let entry = nix::unistd::User::from_name(name)
                .ok()
                .flatten()
                .ok_or_else(|| messages::no_such_account(name))?;
            if entry.uid != me && !me.is_root() {
                return Err(messages::other_account_needs_root(name).into());
            }
            entry
        }
        None => nix::unistd::User::from_uid(me)
            .ok()
            .flatten()
            .ok_or_else(messages::no_passwd_entry)?,
    };
    Ok(Account {
        other: entry.uid != me,
        name: entry.name,
        uid: entry.uid.as_raw(),
        gid: entry.gid.as_raw(),
        home: entry.dir,
        shell: entry.shell,
    })
}

/// `--shell`, else the one recorded already, else `$SHELL` (own account only), else the
/// passwd entry's — whichever is a usable shell that is not sbx-shell.
fn real_shell(
    explicit: Option<&Path>,
    recorded: Option<PathBuf>,
    account: &Account,
) -> Result<PathBuf, Failure> {
    let candidates = shell::Candidates {
        explicit: explicit.map(Path::to_path_buf),
        configured: recorded,
        env: if account.other {
            None
        } else {
            std::env::var_os("SHELL")
        },
        passwd: Some(account.shell.clone()),
    };
    let chosen = shell::resolve(&candidates, &program::System::default())?;
    if shell::fell_back(&candidates, &chosen) {
        return Err(messages::no_real_shell(&account.name, COMMAND).into());
    }
    Ok(chosen)
}

/// The config text with `"shell"` set to `shell`, or `None` when it already is. The
/// existing file must be a valid config (a broken one is never overwritten). A file
/// without `"shell"` keeps its layout: the entry is put after the opening brace.
fn with_shell(
    existing: Option<&str>,
    shell: &Path,
    path: &Path,
) -> Result<Option<String>, Failure> {
    let shell_text = shell
        .to_str()
        .ok_or_else(|| anyhow!("the shell's path is not UTF-8: {}", shell.display()))?;
    let origin = path.display().to_string();
    let Some(text) = existing.filter(|t| !t.trim().is_empty()) else {
        let entry = serde_json::to_string(shell_text)?;
        return Ok(Some(format!("{{\n  \"shell\": {entry}\n}}\n")));
    };
    let config = crate::policy::config::from_str(text, &origin).map_err(|e| {
        anyhow!("{e}\nsbx-shell {COMMAND} changes nothing in a config it cannot read")
    })?;
    if config.shell.as_deref() == Some(shell) {
        return Ok(None);
    }
    let new = if config.shell.is_none() {
        let open = text
            .find('{')
            .ok_or_else(|| anyhow!("{origin}: not a JSON object"))?;
        let rest = &text[open + 1..];
        let separator = if rest.trim_start().starts_with('}') {
            ""
        } else {
            ","
        };
        let entry = serde_json::to_string(shell_text)?;
        format!("{}\n  \"shell\": {entry}{separator}{rest}", &text[..=open])
    } else {
        let mut value: serde_json::Value = serde_json::from_str(text)?;
        value["shell"] = serde_json::Value::String(shell_text.to_string());
        serde_json::to_string_pretty(&value)? + "\n"
    };
    crate::policy::config::from_str(&new, &origin)
        .map_err(|e| anyhow!("internal error: the new config does not load: {e}"))?;
    Ok(Some(new))
}

/// Whether `/etc/shells` (its text) lists `exe`.
fn lists(etc_shells: &str, exe: &Path) -> bool {
    etc_shells
        .lines()
        .map(str::trim)
        .any(|line| !line.starts_with('#') && Path::new(line) == exe)
}

fn apply(step: &Step, account: &Account, root: bool) -> Result<(), Failure> {
    match step {
        Step::Record { config, text } => {
            let dir = config
                .parent()
                .ok_or_else(|| anyhow!("{}: no directory", config.display()))?;
            // Directories made here for another account become that account's.
            let missing: Vec<PathBuf> = dir
                .ancestors()
                .take_while(|d| *d != account.home && !d.exists())
                .map(Path::to_path_buf)
                .collect();
            crate::sys::files::write_private(config, text.as_bytes())
                .with_context(|| format!("cannot write {}", config.display()))?;
            if account.other {
                for path in missing
                    .iter()
                    .map(PathBuf::as_path)
                    .chain([config.as_path()])
                {
                    std::os::unix::fs::lchown(path, Some(account.uid), Some(account.gid))
                        .with_context(|| {
                            format!("cannot give {} to {}", path.display(), account.name)
                        })?;
                }
            }
            eprintln!("sbx-shell {COMMAND}: wrote {}", config.display());
            Ok(())
        }
        Step::ListInEtcShells { exe } => {
            let line = exe.display().to_string();
            as_root(
                &[
                    "/bin/sh".into(),
                    "-c".into(),
                    format!("printf '%s\\n' \"$1\" >> {ETC_SHELLS}"),
                    "sh".into(),
                    line,
                ],
                root,
                COMMAND,
            )
        }
        Step::Chsh { user, exe } => {
            // As root, for the named account; otherwise chsh asks for the password itself.
            let mut args: Vec<OsString> = vec!["-s".into(), exe.into()];
            if root {
                args.push(user.into());
            }
            eprintln!(
                "sbx-shell {COMMAND}: running: {CHSH} -s {}{}",
                exe.display(),
                if root {
                    format!(" {user}")
                } else {
                    String::new()
                }
            );
            let status = Command::new(CHSH)
                .args(&args)
                .status()
                .with_context(|| format!("cannot run {CHSH}"))?;
            if !status.success() {
                return Err(messages::chsh_failed(status, exe).into());
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(existing: Option<&str>) -> Option<String> {
        with_shell(existing, Path::new("/bin/zsh"), Path::new("/c.json")).unwrap()
    }

    #[test]
    fn the_shell_is_recorded_keeping_the_rest_of_the_config() {
        assert_eq!(set(None).unwrap(), "{\n  \"shell\": \"/bin/zsh\"\n}\n");
        assert_eq!(set(Some("{}")).unwrap(), "{\n  \"shell\": \"/bin/zsh\"}");
        let mine = "{\n  \"comment\": \"mine\",\n  \"network\": \"full\"\n}\n";
        let new = set(Some(mine)).unwrap();
        assert_eq!(
            new,
            "{\n  \"shell\": \"/bin/zsh\",\n  \"comment\": \"mine\",\n  \"network\": \"full\"\n}\n"
        );
        // Already recorded: nothing to do; another shell is replaced.
        assert_eq!(set(Some(&new)), None);
        let other = set(Some("{\"shell\": \"/bin/bash\", \"network\": \"full\"}")).unwrap();
        let config = crate::policy::config::from_str(&other, "t").unwrap();
        assert_eq!(config.shell.as_deref(), Some(Path::new("/bin/zsh")));
        assert!(config.network.is_some());
    }

    #[test]
    fn a_broken_config_is_left_alone() {
        let err = with_shell(
            Some("{\"shel\": 1}"),
            Path::new("/bin/zsh"),
            Path::new("/c.json"),
        )
        .unwrap_err();
        assert!(
            format!("{:#}", err.error).contains("changes nothing"),
            "{:#}",
            err.error
        );
    }

    #[test]
    fn etc_shells_is_read_line_by_line() {
        let text = "# /etc/shells\n/bin/sh\n  /usr/local/bin/sbx-shell  \n#/opt/x\n";
        assert!(lists(text, Path::new("/usr/local/bin/sbx-shell")));
        assert!(!lists(text, Path::new("/opt/x")));
        assert!(!lists(text, Path::new("/usr/local/bin/sbx")));
    }
}
