//! The watch: what no mount can refuse inside a writable tree, moved aside the moment it
//! appears. A mount protects what exists; it cannot refuse one new name in a directory
//! that must stay writable (`.mcp.json` at the top of a project, `commondir` in a git
//! directory that needs its lock files, a repository made with `git init`). The program's
//! own calls that make such names are refused when made (`protect::names`); this is what
//! stays behind them, for what changes from outside the sandbox and what enters otherwise.
//! While the session runs, sbx-shell watches the writable trees from outside the sandbox
//! (inotify: no polling) and, as soon as one of these appears, moves it out of the tree
//! into its state directory and names it at the end:
//!
//! - a protected path that did not exist when the session started (`missing`), and
//!   anything that is not a directory standing where one of its ancestors should be;
//! - in every git directory, old or new: a hook (not a `*.sample`), a config holding a
//!   command-running key (`planted::config_keys`), `commondir`, `objects/info/alternates`;
//!   a `.git` file or symlink in any directory — unless it is exactly what was there at
//!   the start (`planted::Snapshot`). A `.git` symlink that was there and is changed is
//!   put back.
//!
//! With Landlock alone, which cannot refuse a change inside a writable tree, the watch
//! also puts back the protected paths that exist there, as recorded at the start
//! (`record`).
//!
//! This restores; it does not prevent: a program outside that reads the place in the
//! instant between the write and the move sees it. A program that plants again and again
//! would make those instants most of the time, so the watch ends a session after
//! `END_AFTER` answers — or at the first one for a place no git command writes
//! (`never_written_by_git`). Everything is reached through
//! descriptors held on the watched directories, never by following a path the program
//! could change.

pub mod record;
pub mod seals;

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::inotify::{InitFlags, Inotify};

mod files;
use files::close_elsewhere;

mod state;
pub use state::{Outcome, Rules, END_AFTER, WATCH_BUDGET};
use state::{State, FINAL_READS};

/// The running watch.
pub struct Watch {
    stop: OwnedFd,
    /// Taken by `finish`; when the watch is dropped unfinished (the session never
    /// started), `Drop` stops it and gives the recorded files their modes back.
    thread: Option<std::thread::JoinHandle<State>>,
    /// Files were sealed (`record::seal`): an unfinished watch must unseal them.
    sealed: bool,
    /// The journal of the seals, removed once they are undone.
    journal: Option<PathBuf>,
}

impl Watch {
    /// Watch the trees from a thread of its own: the walk that sets the watches runs
    /// while the session starts (what is made before a directory is watched is found when
    /// it is listed, after the watch is set).
    pub fn start(rules: Rules) -> io::Result<Watch> {
        // One descriptor per watched directory, and the soft limit may be as low as 1024.
        // Raised here, before the session starts, so the program sees the same limit in
        // every run (the helper sets the program's own from the policy).
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let want = (WATCH_BUDGET as u64 + 1024).min(hard);
            if soft < want {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, want, hard);
            }
        }
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)?;
        let (stop_read, stop) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let mut state = State {
            inotify,
            answers: 0,
            times: HashMap::new(),
            restores: std::collections::BTreeSet::new(),
            files: HashMap::new(),
            ended: false,
            dirs: HashMap::new(),
            queue: Vec::new(),
            rules,
            out: Outcome::default(),
        };
        // Sealed before the program starts, so it can never hold one open for writing; the
        // journal first, so that no kill leaves a seal no run can undo.
        let journal = match (&state.rules.seal_journals, state.rules.recorded.is_empty()) {
            (Some(dir), false) => Some(seals::write_journal(
                dir,
                &seals::sealed_modes(&state.rules.recorded),
            )?),
            _ => None,
        };
        record::seal(&state.rules.recorded, true);
        let recorded = std::sync::Arc::clone(&state.rules.recorded);
        let thread = std::thread::Builder::new()
            .name("sbx-watch".into())
            .spawn(move || {
                state.watch_roots();
                state.run(&stop_read);
                state
            })
            .inspect_err(|_| {
                record::seal(&recorded, false);
                if let Some(j) = &journal {
                    let _ = std::fs::remove_file(j);
                }
            })?;
        Ok(Watch {
            stop,
            thread: Some(thread),
            sealed: !recorded.is_empty(),
            journal,
        })
    }

    /// Stop watching, handle what is still queued, and say what was moved. (The walk
    /// listed each directory after its watch was set, and a lost event is an overflow
    /// event, which lists everything again: nothing needs a last walk.)
    pub fn finish(mut self) -> Outcome {
        let _ = nix::unistd::write(&self.stop, b"x");
        let Some(Ok(mut state)) = self.thread.take().map(std::thread::JoinHandle::join) else {
            return Outcome {
                incomplete: true,
                ..Outcome::default()
            };
        };
        // Bounded, however busy the trees still are (a process outside may write on).
        for _ in 0..FINAL_READS {
            if !state.drain() {
                break;
            }
        }
        // Every recorded path once more, whatever the events said: the trees are left as
        // recorded, the files with their own modes again.
        state.ended = true;
        state.restores.extend(0..state.rules.recorded.len());
        state.restore_queued();
        let State {
            inotify,
            dirs,
            rules,
            mut out,
            ..
        } = state;
        drop(dirs);
        close_elsewhere(OwnedFd::from(inotify));
        if let Some(j) = self.journal.take() {
            let _ = std::fs::remove_file(j);
        }
        out.keep = rules.keep;
        out
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Without sealed files, nothing to undo: the thread is not waited for (its walk
        // of a large tree could take a while), it ends with the process.
        let Some(thread) = self.thread.take().filter(|_| self.sealed) else {
            return;
        };
        let _ = nix::unistd::write(&self.stop, b"x");
        if let Ok(state) = thread.join() {
            record::seal(&state.rules.recorded, false);
            if let Some(j) = self.journal.take() {
                let _ = std::fs::remove_file(j);
            }
        }
    }
}

/// Where the journals of seals are kept (`seals::write_journal`).
pub fn seal_journals(home: &Path) -> PathBuf {
    crate::sys::files::state_dir(home).join("sealed")
}

/// Give their own modes back to the files that a session killed while its seals held
/// left sealed (`seals::undo_left_seals`); the line that says so, if any were.
pub fn undo_left_seals(home: &Path) -> Option<String> {
    let alive = |pid: u32| {
        i32::try_from(pid).is_ok_and(|pid| {
            // Signal 0 only checks: ESRCH means gone, EPERM that it exists.
            !matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Err(nix::errno::Errno::ESRCH)
            )
        })
    };
    let undone = seals::undo_left_seals(&seal_journals(home), &alive);
    let named = crate::sys::say::first_and_more(&undone)?;
    Some(format!(
        "sbx-shell: gave {named} its own mode back: a session killed earlier left it sealed"
    ))
}

/// The protected paths inside `roots` that do not exist (`exists` says), and are not
/// inside a git directory: what the watch moves aside when it appears.
pub fn missing(
    protected: &[&Path],
    roots: &[(PathBuf, bool)],
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = protected
        .iter()
        .filter(|p| roots.iter().any(|(r, _)| p.starts_with(r) && *p != r))
        .filter(|p| !p.components().any(|c| c.as_os_str() == ".git"))
        .filter(|p| !exists(p))
        .map(|p| p.to_path_buf())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::files::never_written_by_git;
    use super::*;

    #[test]
    fn missing_protected_paths_are_those_inside_a_tree_outside_git_directories() {
        let roots = [
            (PathBuf::from("/w"), false),
            (PathBuf::from("/h/.claude"), false),
        ];
        let protected = [
            Path::new("/w/.mcp.json"),
            Path::new("/w/.vscode"),
            Path::new("/w/.git/config"),
            Path::new("/w/sub/.git/hooks"),
            Path::new("/h/.claude/settings.json"),
            Path::new("/h/.bashrc"),
            Path::new("/w"),
        ];
        let exists = |p: &Path| p == Path::new("/w/.vscode");
        assert_eq!(
            missing(&protected, &roots, &exists),
            [
                PathBuf::from("/h/.claude/settings.json"),
                PathBuf::from("/w/.mcp.json")
            ]
        );
    }

    /// Landlock alone: a recorded config written and a hook planted while the watch runs
    /// are put back at once (before the session ends), and reported as restored.
    #[test]
    fn recorded_paths_are_restored_while_it_runs() {
        let base = std::env::temp_dir().join(format!("sbx-watch-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
        std::fs::create_dir_all(ws.join(".git/refs")).unwrap();
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let git = ws.join(".git");
        let recorded = record::record(&[
            (git.join("config"), ws.clone()),
            (git.join("hooks"), ws.clone()),
        ])
        .unwrap();
        let found = crate::protect::repos::scan(&ws, false);
        let rules = Rules {
            roots: vec![(ws.clone(), false)],
            missing: Vec::new(),
            before: crate::protect::planted::snapshot(&found, Some(&ws), &[], &[&ws]),
            links: Vec::new(),
            keep: base.join("keep"),
            recorded: recorded.into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        let watch = Watch::start(rules).unwrap();
        let settle = |what: &dyn Fn() -> bool| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !what() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            what()
        };
        // The watch's first listing may see the tree before or after these: either way
        // the events, or that listing, restore them.
        std::fs::write(git.join("config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        assert!(settle(&|| std::fs::read_to_string(git.join("config"))
            .is_ok_and(|c| c == "[core]\n\tbare = false\n")));
        assert!(settle(&|| !git.join("hooks/pre-commit").exists()));
        // Through a second name of the file, which no directory watch sees.
        std::fs::hard_link(git.join("config"), ws.join("other")).unwrap();
        std::fs::write(ws.join("other"), "[core]\n\thooksPath = /evil\n").unwrap();
        assert!(settle(&|| std::fs::read_to_string(git.join("config"))
            .is_ok_and(|c| c == "[core]\n\tbare = false\n")));
        // Through a rename of the git directory and a new one in its place.
        std::fs::rename(&git, ws.join("moved")).unwrap();
        std::fs::create_dir(&git).unwrap();
        std::fs::write(git.join("config"), "[core]\n\tpager = evil\n").unwrap();
        assert!(settle(&|| std::fs::read_to_string(git.join("config"))
            .is_ok_and(|c| c == "[core]\n\tbare = false\n")));
        let out = watch.finish();
        let restored: Vec<String> = out
            .restored
            .iter()
            .map(|p| p.path.strip_prefix(&ws).unwrap().display().to_string())
            .collect();
        assert!(
            restored.contains(&".git/config".to_string()),
            "{restored:?}"
        );
        assert!(
            restored.contains(&".git/hooks/pre-commit".to_string()),
            "{restored:?}"
        );
        assert!(out.moved.is_empty(), "{:?}", out.moved);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A fresh workspace under `tag` whose protected path `name` is missing, and the rules
    /// of a test's watch for it: (base, workspace, the path, rules).
    fn one_missing(tag: &str, name: &str) -> (PathBuf, PathBuf, PathBuf, Rules) {
        let base = std::env::temp_dir().join(format!("sbx-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("ws")).unwrap();
        let ws = std::fs::canonicalize(base.join("ws")).unwrap();
        let planted = ws.join(name);
        let rules = Rules {
            roots: vec![(ws.clone(), false)],
            missing: vec![planted.clone()],
            before: crate::protect::planted::Snapshot::default(),
            links: Vec::new(),
            keep: base.join("keep"),
            recorded: Vec::new().into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        (base, ws, planted, rules)
    }

    /// A protected directory that a program keeps filling while the watch takes it out
    /// (`mkdir .vscode && echo > .vscode/tasks.json`, in a loop here): it is renamed out
    /// of the way first, so it is gone at once and not left behind half emptied.
    #[test]
    fn a_directory_filled_while_it_is_taken_out_is_taken_out() {
        let (base, ws, planted, rules) = one_missing("fill", ".vscode");
        let watch = Watch::start(rules).unwrap();
        // Give the watch's walk time to watch the workspace.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let filler = {
            let planted = planted.clone();
            std::thread::spawn(move || {
                let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
                let mut n = 0u64;
                while std::time::Instant::now() < until {
                    let _ = std::fs::create_dir(&planted);
                    let _ = std::fs::write(planted.join(format!("f{n}")), "x");
                    n += 1;
                }
            })
        };
        filler.join().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while planted.exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!planted.exists(), "still there");
        let out = watch.finish();
        assert!(
            out.moved.iter().all(|p| !p.what.contains("could not")),
            "{:?}",
            out.moved
        );
        let litter: Vec<_> = std::fs::read_dir(&ws)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(litter.is_empty(), "{litter:?}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn only_a_commondir_outside_a_worktrees_directory_ends_a_session_at_once() {
        for (path, at_once) in [
            ("/ws/.git/commondir", true),
            ("/ws/sub/.git/commondir", true),
            ("/ws/bare.git/commondir", true),
            ("/ws/.git/modules/m/commondir", true),
            ("/ws/.git/worktrees/wt/commondir", false),
            ("/ws/.git/hooks/post-checkout", false),
            ("/ws/.mcp.json", false),
        ] {
            assert_eq!(never_written_by_git(Path::new(path)), at_once, "{path}");
        }
    }

    /// A place planted again the moment it is gone: the watch answers until `END_AFTER`
    /// answers, then says it ends the session (a test's watch kills nothing).
    #[test]
    fn a_place_planted_again_and_again_ends_the_session() {
        let (base, _, planted, rules) = one_missing("end", ".mcp.json");
        let watch = Watch::start(rules).unwrap();
        let gone = || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while planted.exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            !planted.exists()
        };
        for i in 0..END_AFTER {
            std::fs::write(&planted, "{}").unwrap();
            assert!(gone(), "answer {i}");
        }
        let out = watch.finish();
        assert_eq!(out.ended.as_deref(), Some(planted.as_path()));
        assert_eq!(out.moved.len(), 1, "{:?}", out.moved);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The recorded files are sealed as soon as the watch starts (before the program
    /// can run), and get their modes back when it ends — also when it is dropped because
    /// the session never started.
    #[test]
    fn recorded_files_are_sealed_from_the_start_until_the_end() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let base = std::env::temp_dir().join(format!("sbx-watch-seal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let config = ws.join(".git/config");
        std::fs::write(&config, "[core]\n").unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let config = ws.join(".git/config");
        let mode = || std::fs::metadata(&config).unwrap().mode() & 0o7777;
        let rules = || Rules {
            roots: vec![(ws.clone(), false)],
            missing: Vec::new(),
            before: crate::protect::planted::Snapshot::default(),
            links: Vec::new(),
            keep: base.join("keep"),
            recorded: record::record(&[(config.clone(), ws.clone())])
                .unwrap()
                .into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        let watch = Watch::start(rules()).unwrap();
        assert_eq!(mode(), 0o444);
        let out = watch.finish();
        assert_eq!(mode(), 0o644);
        assert!(out.restored.is_empty(), "{:?}", out.restored);
        drop(Watch::start(rules()).unwrap());
        assert_eq!(mode(), 0o644);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The watch on a real tree: what is planted while it runs is moved aside and kept;
    /// what was there at the start, and ordinary files, are left alone.
    #[test]
    fn planted_places_are_moved_aside_and_the_rest_is_left_alone() {
        let base = std::env::temp_dir().join(format!("sbx-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        let keep = base.join("keep");
        std::fs::create_dir_all(ws.join("old/.git/hooks")).unwrap();
        std::fs::write(ws.join("old/.git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(ws.join("old/.git/config"), "[core]\n\tpager = less\n").unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let found = crate::protect::repos::scan(&ws, false);
        let before = crate::protect::planted::snapshot(&found, Some(&ws), &[], &[&ws]);
        let rules = Rules {
            roots: vec![(ws.clone(), false)],
            missing: vec![ws.join(".mcp.json"), ws.join(".claude/settings.json")],
            before,
            links: Vec::new(),
            keep: keep.clone(),
            recorded: Vec::new().into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        let watch = Watch::start(rules).unwrap();
        // Whole, by a rename: a file made empty and then written may be moved aside (and
        // its copy kept) between the two.
        std::fs::write(ws.join("mcp.tmp"), "{}").unwrap();
        std::fs::rename(ws.join("mcp.tmp"), ws.join(".mcp.json")).unwrap();
        std::fs::create_dir_all(ws.join("new/deep/.git/hooks")).unwrap();
        std::fs::write(ws.join("new/deep/.git/hooks/post-merge"), "#!/bin/sh\n").unwrap();
        std::fs::write(ws.join("new/deep/.git/hooks/post-merge.sample"), "x").unwrap();
        std::fs::write(ws.join("new/deep/.git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::create_dir_all(ws.join("x")).unwrap();
        std::fs::write(ws.join("x/settings.json"), "{}").unwrap();
        std::fs::rename(ws.join("x"), ws.join(".claude")).unwrap();
        std::fs::write(ws.join("notes.txt"), "mine").unwrap();
        let out = watch.finish();
        let mut moved: Vec<String> = out
            .moved
            .iter()
            .map(|p| p.path.strip_prefix(&ws).unwrap().display().to_string())
            .collect();
        moved.sort();
        assert_eq!(
            moved,
            [
                ".claude/settings.json",
                ".mcp.json",
                "new/deep/.git/hooks/post-merge"
            ]
        );
        assert!(!out.incomplete);
        for left in [
            "old/.git/hooks/pre-commit",
            "old/.git/config",
            "new/deep/.git/config",
            "new/deep/.git/hooks/post-merge.sample",
            "notes.txt",
        ] {
            assert!(ws.join(left).exists(), "{left}");
        }
        let kept = keep.join(ws.strip_prefix("/").unwrap());
        assert_eq!(
            std::fs::read_to_string(kept.join(".mcp.json")).unwrap(),
            "{}"
        );
        assert!(kept.join("new/deep/.git/hooks/post-merge").is_file());
        let _ = std::fs::remove_dir_all(&base);
    }
}
