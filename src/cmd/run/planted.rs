//! The places in the writable trees that would run code outside (`protect::planted`),
//! recorded before the session and compared after it: where the guard judges every name
//! (`protect::names`), only the executables in `$PATH`; where it cannot (Linux before
//! 5.14), everything no read-only mount held.

use super::prepare::Plan;
use crate::policy::Policy;
use crate::protect::planted::{self, Planted, Snapshot};
use crate::protect::repos::{self, Repos};
use crate::sandbox::InProcess;
use crate::sys::say;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub(super) struct PlantedCheck {
    before: Snapshot,
    path_dirs: Vec<PathBuf>,
    /// The helper's guard judges every name made and every writing open
    /// (`protect::names`): what it refuses cannot be planted, so the report covers only
    /// what it does not judge (executables in `$PATH`).
    mediated: bool,
}

impl PlantedCheck {
    pub(super) fn start(
        plan: &Plan,
        layers: &InProcess,
        git: &Repos,
        env: &[(OsString, OsString)],
    ) -> PlantedCheck {
        let mediated = layers.names.is_some();
        let path_dirs: Vec<PathBuf> = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::env::split_paths(v).collect())
            .unwrap_or_default();
        PlantedCheck {
            before: snapshot(&plan.policy, git, &path_dirs, mediated),
            path_dirs,
            mediated,
        }
    }

    /// What is new or changed since `start` (the writable trees scanned again, so that
    /// repositories made during the session count), said on one line.
    pub(super) fn finish(self, policy: &Policy) -> Vec<Planted> {
        let git = if self.mediated {
            Repos::default()
        } else {
            repos::scan_writable(policy)
        };
        let after = snapshot(policy, &git, &self.path_dirs, self.mediated);
        let allow: Vec<String> = policy.git_config_allow.iter().cloned().collect();
        // A regular file only, and whole (a FIFO there would wait; a huge file is named).
        let read = |p: &Path| {
            crate::sys::files::read_regular(p, crate::policy::gitconfig::CONFIG_LIMIT).ok()
        };
        let left = planted::compare(&self.before, &after, &read, &allow);
        if let Some(line) = planted::line(&left) {
            say::warning(&line);
        }
        left
    }
}

/// The places to compare at the end; `mediated`: only the executables in `$PATH`
/// (the rest is judged when it is made).
fn snapshot(
    policy: &Policy,
    git: &Repos,
    path_dirs: &[std::path::PathBuf],
    mediated: bool,
) -> Snapshot {
    let fs = &policy.filesystem;
    let roots: Vec<&std::path::Path> = fs
        .writable_roots()
        .into_iter()
        .filter(|r| *r != std::path::Path::new("/"))
        .collect();
    let workspace =
        Some(fs.workspace.real()).filter(|w| !mediated && roots.iter().any(|r| w.starts_with(r)));
    let none = Repos::default();
    let git = if mediated { &none } else { git };
    planted::snapshot(git, workspace, path_dirs, &roots)
}
