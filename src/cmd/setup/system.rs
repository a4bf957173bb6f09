//! `sbx-shell setup`: what this machine lacks for the strongest sandbox, and how to install
//! it — bubblewrap through the system's package manager, and (Ubuntu 23.10 and later) the
//! AppArmor profile that lets `/usr/bin/bwrap` create user namespaces. Nothing system-wide
//! beyond that. Pure: the facts come in (`host::Machine`, the package managers present),
//! the plan goes out; `cmd::setup` asks for consent and runs it.

use crate::cmd::messages;
use std::path::{Path, PathBuf};

use crate::host::{Machine, BWRAP_PATHS};

/// Where the AppArmor profile is installed.
pub const APPARMOR_PROFILE: &str = "/etc/apparmor.d/sbx-shell-bwrap";

/// One change setup makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupStep {
    /// Install bubblewrap: run `argv` (as root).
    InstallBubblewrap { argv: Vec<String> },
    /// Write `text` to `path` (root-owned, 0644) and load it with `apparmor_parser -r`.
    AppArmorProfile { path: PathBuf, text: String },
}

impl SetupStep {
    /// What the step does, in one line.
    pub fn describe(&self) -> String {
        match self {
            SetupStep::InstallBubblewrap { argv } => {
                format!("install bubblewrap: {}", argv.join(" "))
            }
            SetupStep::AppArmorProfile { path, .. } => format!(
                "let bwrap create user namespaces under AppArmor's restriction: write {} and load it (apparmor_parser -r)",
                path.display()
            ),
        }
    }
}

/// The changes, and what setup cannot change (with the remedy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetupPlan {
    pub steps: Vec<SetupStep>,
    pub cannot: Vec<String>,
}

/// The package managers setup knows, at fixed paths, with their install command.
pub const PACKAGE_MANAGERS: &[(&str, &[&str])] = &[
    ("/usr/bin/apt-get", &["install", "-y", "bubblewrap"]),
    ("/usr/bin/dnf", &["install", "-y", "bubblewrap"]),
    (
        "/usr/bin/zypper",
        &["--non-interactive", "install", "bubblewrap"],
    ),
    ("/usr/bin/pacman", &["-S", "--noconfirm", "bubblewrap"]),
    ("/sbin/apk", &["add", "bubblewrap"]),
];

/// What to do on `machine`; `has` says whether a path exists (the package managers, the
/// AppArmor file system).
pub fn plan(machine: &Machine, has: &dyn Fn(&Path) -> bool) -> SetupPlan {
    let mut plan = SetupPlan::default();
    if machine.os != "linux" {
        return plan;
    }
    let restricted = !machine.root
        && machine
            .userns
            .apparmor_restrict
            .as_deref()
            .is_some_and(|v| v.trim() == "1")
        && has(Path::new("/sys/kernel/security/apparmor"));
    match (&machine.bwrap, machine.bwrap_runs()) {
        (_, Ok(_)) => {}
        (None, Err(_)) => {
            match PACKAGE_MANAGERS
                .iter()
                .find(|(path, _)| has(Path::new(path)))
            {
                Some((manager, args)) => plan.steps.push(SetupStep::InstallBubblewrap {
                    argv: std::iter::once(manager)
                        .chain(args.iter())
                        .map(|a| a.to_string())
                        .collect(),
                }),
                None => plan.cannot.push(messages::no_package_manager()),
            }
            if restricted {
                plan.steps.push(apparmor_step(Path::new(BWRAP_PATHS[0])));
            }
        }
        (Some(path), Err(_)) if restricted => plan.steps.push(apparmor_step(path)),
        (Some(_), Err(no)) => plan
            .cannot
            .push(messages::bwrap_cannot_run(&no.cause, &no.fix)),
    }
    if let Err(why) = &machine.landlock_abi {
        plan.cannot.push(messages::no_landlock(why));
    }
    plan
}

fn apparmor_step(bwrap: &Path) -> SetupStep {
    SetupStep::AppArmorProfile {
        path: PathBuf::from(APPARMOR_PROFILE),
        text: apparmor_profile(bwrap),
    }
}

/// The AppArmor profile for `bwrap`: unconfined, plus the right to create user namespaces
/// (what `kernel.apparmor_restrict_unprivileged_userns=1` withholds). Needs AppArmor 4.
pub fn apparmor_profile(bwrap: &Path) -> String {
    format!(
        "# Written by `sbx-shell setup`: lets bubblewrap create user namespaces under\n\
         # kernel.apparmor_restrict_unprivileged_userns=1 (Ubuntu 23.10 and later).\n\
         # Remove it with: sudo apparmor_parser -R {APPARMOR_PROFILE} && sudo rm {APPARMOR_PROFILE}\n\
         abi <abi/4.0>,\n\
         include <tunables/global>\n\
         \n\
         profile sbx-shell-bwrap {} flags=(unconfined) {{\n\
         \x20 userns,\n\
         \n\
         \x20 include if exists <local/sbx-shell-bwrap>\n\
         }}\n",
        bwrap.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::test_support::capable_linux;

    fn ubuntu(bwrap: bool) -> Machine {
        let mut m = capable_linux();
        m.userns.apparmor_restrict = Some("1".into());
        m.bwrap = bwrap.then(|| "/usr/bin/bwrap".into());
        m.bwrap_probe =
            bwrap.then(|| Err("exit status: 1: setting up uid map: Permission denied".into()));
        m
    }

    fn everything(_: &Path) -> bool {
        true
    }

    #[test]
    fn a_machine_that_can_run_everything_needs_nothing() {
        assert_eq!(plan(&capable_linux(), &everything), SetupPlan::default());
    }

    #[test]
    fn ubuntu_gets_the_package_and_the_apparmor_profile() {
        let p = plan(&ubuntu(false), &everything);
        assert_eq!(
            p.steps[0],
            SetupStep::InstallBubblewrap {
                argv: vec![
                    "/usr/bin/apt-get".into(),
                    "install".into(),
                    "-y".into(),
                    "bubblewrap".into()
                ]
            }
        );
        assert!(
            matches!(&p.steps[1], SetupStep::AppArmorProfile { path, .. } if path == Path::new(APPARMOR_PROFILE))
        );
        let p = plan(&ubuntu(true), &everything);
        assert_eq!(p.steps.len(), 1, "{p:?}");
        assert!(p.cannot.is_empty());
        // Root needs no profile; nor does a kernel without AppArmor.
        let mut root = ubuntu(false);
        root.root = true;
        assert_eq!(plan(&root, &everything).steps.len(), 1);
        let no_apparmor = |p: &Path| !p.starts_with("/sys/kernel/security");
        assert_eq!(plan(&ubuntu(false), &no_apparmor).steps.len(), 1);
    }

    #[test]
    fn what_setup_cannot_change_is_said_with_its_fix() {
        let mut container = capable_linux();
        container.container = Some("Docker".into());
        container.bwrap_probe = Some(Err("Operation not permitted".into()));
        let p = plan(&container, &everything);
        assert!(p.steps.is_empty());
        assert!(p.cannot[0].contains("seccomp=unconfined"), "{p:?}");
        let mut bare = capable_linux();
        bare.bwrap = None;
        bare.landlock_abi = Err("not in this kernel (ENOSYS)".into());
        let p = plan(&bare, &|_| false);
        assert!(p.cannot[0].contains("no known package manager"), "{p:?}");
        assert!(p.cannot[1].contains("ENOSYS"), "{p:?}");
    }

    #[test]
    fn the_profile_names_the_binary_and_allows_user_namespaces() {
        let text = apparmor_profile(Path::new("/usr/bin/bwrap"));
        assert!(text.contains("abi <abi/4.0>,\n"));
        assert!(text
            .contains("profile sbx-shell-bwrap /usr/bin/bwrap flags=(unconfined) {\n  userns,\n"));
    }
}
