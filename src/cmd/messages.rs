//! The sentences sbx-shell's commands say with a remedy (the options read, `login-shell`,
//! `setup`, `home`), each a function: the problem, then `Hint:` (an error) or `Fix:` (a
//! line of a plan) and the exact action. A run's own are in `run::messages`.

use std::fmt::Display;
use std::path::Path;

use anyhow::anyhow;

use crate::sys::say::{hinted, with_fix};

/// No home directory is known.
pub(super) fn no_home() -> anyhow::Error {
    anyhow!(hinted("cannot find the home directory", "set HOME"))
}

/// A `--credential` that is not `VAR@HOST[,HOST…]`.
pub(super) fn credential_spelling(spec: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--credential {spec}: not VAR@HOST[,HOST…]"),
        "name the variable, then the hosts it goes to: --credential \
         GH_TOKEN@api.github.com,github.com"
    ))
}

/// A `--net` that is none of its forms.
pub(super) fn net_spelling(value: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--net {value}: not none, full or allow=DOMAINS"),
        "e.g. --net allow=api.example.com,*.example.org"
    ))
}

/// A `--timeout` that is not a duration.
pub(super) fn timeout_spelling(value: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--timeout {value}: not a duration"),
        "give seconds, or a number with s, m or h: 90, 90s, 30m, 2h"
    ))
}

/// `login-shell` from an executable that may go away: a line of its report.
pub(super) fn install_first(exe: &Path, command: &str) -> String {
    format!(
        "note: {} may go away or change (a build or temporary directory); install it first: \
         sudo install -m 755 {} /usr/local/bin/sbx-shell, then run /usr/local/bin/sbx-shell \
         {command}\n",
        exe.display(),
        exe.display()
    )
}

/// `--user` names no account.
pub(super) fn no_such_account(name: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("no such account: {name}"),
        format_args!("check the name with `id {name}`")
    ))
}

/// `--user` names another account, and this is not root.
pub(super) fn other_account_needs_root(name: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--user {name}: only root can set up another account"),
        format_args!("run it as {name}, or as root")
    ))
}

/// This account has no passwd entry.
pub(super) fn no_passwd_entry() -> anyhow::Error {
    anyhow!(hinted(
        "this account has no passwd entry",
        "run it as a user with an entry in /etc/passwd"
    ))
}

/// `login-shell` finds no real shell for the account.
pub(super) fn no_real_shell(account: &str, command: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "no real shell is known for {account}: $SHELL and the passwd entry name sbx-shell or \
             nothing usable"
        ),
        format_args!("name it: sbx-shell {command} --shell /bin/bash")
    ))
}

/// `chsh` failed.
pub(super) fn chsh_failed(status: impl Display, exe: &Path) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("chsh failed ({status})"),
        format_args!("run `chsh -s {}` yourself", exe.display())
    ))
}

/// A command that changes the system, with no terminal to consent on.
pub(super) fn consent_needs_terminal(command: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "{command} changes the system and needs your consent, but stdin is not a terminal"
        ),
        format_args!("run `sbx-shell {command}` on a terminal, or pass --yes")
    ))
}

/// `apparmor_parser` is missing.
pub(super) fn no_apparmor_parser() -> anyhow::Error {
    anyhow!(hinted(
        "apparmor_parser is not installed",
        "install the apparmor package, then run setup again"
    ))
}

/// `sudo` is missing.
pub(super) fn no_sudo(sudo: &str, command: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("{sudo} is not installed"),
        format_args!("run `sbx-shell {command}` as root")
    ))
}

/// A step run as root failed.
pub(super) fn root_step_failed(argv: &str, status: impl Display, command: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("`{argv}` failed ({status})"),
        format_args!("fix what it reports, then run `sbx-shell {command}` again")
    ))
}

/// `setup` can install no bubblewrap: a line of its plan.
pub(super) fn no_package_manager() -> String {
    "bubblewrap is not installed and no known package manager is (apt-get, dnf, zypper, \
     pacman, apk): install bubblewrap yourself"
        .to_string()
}

/// bwrap cannot run for a reason `setup` does not change: a line of its plan.
pub(super) fn bwrap_cannot_run(cause: impl Display, fix: impl Display) -> String {
    with_fix(format_args!("bwrap cannot run: {cause}"), fix)
}

/// Landlock is missing: a line of `setup`'s plan.
pub(super) fn no_landlock(why: impl Display) -> String {
    with_fix(
        format_args!("Landlock: {why}"),
        "use Linux 6.12 or later with Landlock in the LSM list",
    )
}

/// `home --remove NAME` names no private home.
pub(super) fn no_private_home(name: &str, homes: &Path) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "no private home for the profile {name:?} in {}",
            homes.display()
        ),
        "`sbx-shell home` lists them"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_ends_with_its_hint() {
        for e in [
            no_home(),
            credential_spelling("X"),
            net_spelling("x"),
            timeout_spelling("x"),
            no_such_account("x"),
            other_account_needs_root("x"),
            no_passwd_entry(),
            no_real_shell("x", "login-shell"),
            chsh_failed("exit status: 1", Path::new("/e")),
            consent_needs_terminal("setup"),
            no_apparmor_parser(),
            no_sudo("/usr/bin/sudo", "setup"),
            root_step_failed("a b", "exit status: 1", "setup"),
            no_private_home("p", Path::new("/h")),
        ] {
            let text = e.to_string();
            let (problem, hint) = text.split_once("\nHint: ").unwrap();
            assert!(!problem.is_empty() && !hint.is_empty(), "{text}");
            assert!(!hint.contains('\n') && !text.contains("  "), "{text}");
        }
        assert_eq!(
            no_package_manager(),
            "bubblewrap is not installed and no known package manager is (apt-get, dnf, zypper, \
             pacman, apk): install bubblewrap yourself"
        );
        assert!(!install_first(Path::new("/tmp/x"), "login-shell").contains("  "));
    }
}
