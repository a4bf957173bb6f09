//! The places in the writable trees that would run code outside (`protect::planted`),
//! recorded before the session and compared after it; on Linux, with the supervisor's
//! live watch (`os::Live`) that moves aside what no mount could refuse while it runs.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::os::Live;
use super::prepare::Plan;
use crate::policy::Policy;
use crate::protect::planted::{self, Planted, Snapshot};
use crate::protect::repos::{self, Repos};
use crate::sandbox::{Backend, InProcess};
use crate::sys::exit::Failure;
use crate::sys::say::{self, Verbosity};

pub(super) struct PlantedCheck {
    before: Snapshot,
    path_dirs: Vec<PathBuf>,
    /// `.git` symlinks and their targets at the start.
    links: Vec<(PathBuf, PathBuf)>,
    /// Landlock alone: the paths the watch puts back as recorded (`watch::record`).
    recorded: Vec<PathBuf>,
    /// The helper's guard judges every name made and every writing open
    /// (`protect::names`): what it refuses cannot be planted, so the report covers only
    /// what it does not judge (executables in `$PATH`), and under bwrap nothing is watched.
    mediated: bool,
    live: Option<Live>,
}

impl PlantedCheck {
    pub(super) fn start(
        plan: &Plan,
        (backend, layers): (&Backend, &InProcess),
        git: &Repos,
        env: &[(OsString, OsString)],
        (started, say): (SystemTime, Verbosity),
    ) -> Result<PlantedCheck, Failure> {
        let policy = &plan.policy;
        let mediated = layers.names.is_some();
        let path_dirs: Vec<PathBuf> = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::env::split_paths(v).collect())
            .unwrap_or_default();
        // What a session killed while its seals held left behind, put back first.
        super::os::undo_left_seals(&plan.home, say);
        let before = snapshot(policy, git, &path_dirs, mediated);
        let (live, recorded) = if mediated {
            // What the program makes or writes is judged when it does it; what the host
            // does meanwhile is the host's.
            (None, Vec::new())
        } else {
            let whole = || snapshot(policy, git, &path_dirs, false);
            Live::start(plan, (backend, git), &whole, (started, say))?
        };
        Ok(PlantedCheck {
            before,
            path_dirs,
            links: git.links.clone(),
            recorded,
            mediated,
            live,
        })
    }

    /// What the live watch moved aside, then what is new or changed since `start` (the
    /// writable trees scanned again, so that repositories made during the session count);
    /// each list said on one line. Also whether the watch ended the session
    /// (`watch::END_AFTER`).
    pub(super) fn finish(self, policy: &Policy) -> (Vec<Planted>, bool) {
        let (mut all, ended_by_watch) = self.live.map_or((Vec::new(), false), Live::finish);
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
        let mut left = planted::compare(&self.before, &after, &read, &allow);
        // A `.git` symlink put back by the watch is new, but says what it said; a recorded
        // path is as recorded (the watch's last pass), only its inode or time is new.
        left.retain(|p| {
            !self.links.iter().any(|(link, target)| {
                *link == p.path && std::fs::read_link(link).is_ok_and(|t| t == *target)
            }) && !self.recorded.iter().any(|r| p.path.starts_with(r))
        });
        if let Some(line) = planted::line(&left) {
            say::warning(&line);
        }
        all.extend(left);
        (all, ended_by_watch)
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
