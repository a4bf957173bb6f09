//! The end-of-session report: the places in the writable trees that would run code outside
//! the sandbox, recorded when the session starts and compared when it ends. Whatever is
//! new or changed is named on one line and in the session log.
//!
//! The places: every git directory's hooks, config (and the command-running keys in it),
//! `commondir`, `objects/info/alternates` and `.git` pointer files, including repositories
//! made during the session; the editor and agent files of the workspace (`PROJECT_FILES`);
//! the executables in `$PATH` directories inside a writable tree. Most of them cannot be
//! changed at all under bwrap (`sandbox::bwrap::mounts`); the report names what a backend
//! or a path name could not stop — a new repository, a `commondir` written into an
//! existing one, a `.vscode/` made where there was none.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::protect::repos::Repos;

/// Files of a project that editors and agents run or obey when they open it.
pub const PROJECT_FILES: &[&str] = &[
    ".vscode/tasks.json",
    ".vscode/settings.json",
    ".vscode/launch.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
    ".envrc",
    ".idea/workspace.xml",
];

/// What a place was: enough to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Print {
    len: u64,
    mtime_ns: i128,
    ino: u64,
    mode: u32,
}

impl Print {
    pub fn of(m: &std::fs::Metadata) -> Print {
        Print {
            len: m.len(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            ino: m.ino(),
            mode: m.mode(),
        }
    }
}

/// The places and what they were, by path, with what each is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot(BTreeMap<PathBuf, (What, Print)>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    GitHook,
    GitConfig,
    GitPointer,
    ProjectFile,
    Executable,
}

/// One new or changed place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planted {
    pub path: PathBuf,
    /// "new git hook", "changed git config (core.fsmonitor)" …
    pub what: String,
}

/// Record the places now: `git` from `repos::scan_writable`, the project files of
/// `workspace` (when it is writable), the executables of `path_dirs` inside `roots`.
pub fn snapshot(
    git: &Repos,
    workspace: Option<&Path>,
    path_dirs: &[PathBuf],
    roots: &[&Path],
) -> Snapshot {
    let mut s = Snapshot::default();
    let mut add = |path: PathBuf, what: What| {
        if let Ok(m) = path.symlink_metadata() {
            s.0.insert(path, (what, Print::of(&m)));
        }
    };
    for g in &git.git_dirs {
        add(g.dir.join("config"), What::GitConfig);
        add(g.dir.join("config.worktree"), What::GitConfig);
        add(g.dir.join("commondir"), What::GitPointer);
        add(g.dir.join("objects/info/alternates"), What::GitPointer);
        if let Some(pointer) = &g.pointer {
            add(pointer.clone(), What::GitPointer);
        }
        for hook in entries(&g.dir.join("hooks")) {
            if !hook.to_string_lossy().ends_with(".sample") {
                add(hook, What::GitHook);
            }
        }
    }
    for (link, _) in &git.links {
        add(link.clone(), What::GitPointer);
    }
    if let Some(ws) = workspace {
        for rel in PROJECT_FILES {
            add(ws.join(rel), What::ProjectFile);
        }
    }
    for dir in path_dirs
        .iter()
        .filter(|d| roots.iter().any(|r| d.starts_with(r)))
    {
        for file in entries(dir) {
            add(file, What::Executable);
        }
    }
    s
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|it| it.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// What is new or changed in `after` since `before`, in path order. A git config is named
/// only when it holds keys ordinary git work does not write (`config_keys`, with the
/// policy's `allow`), or cannot be read whole as a file (`read`: `None`): a new repository
/// is no plant.
pub fn compare(
    before: &Snapshot,
    after: &Snapshot,
    read: &dyn Fn(&Path) -> Option<Vec<u8>>,
    allow: &[String],
) -> Vec<Planted> {
    let mut out = Vec::new();
    for (path, (what, print)) in &after.0 {
        let age = match before.0.get(path) {
            None => "new",
            Some((_, was)) if was != print => "changed",
            Some(_) => continue,
        };
        let kind = match what {
            What::GitHook => "git hook".to_string(),
            What::GitConfig => match read(path) {
                None => "git config that cannot be read whole as a file".to_string(),
                Some(text) => {
                    let keys = config_keys(&text, allow);
                    if keys.is_empty() {
                        continue;
                    }
                    format!("git config ({})", keys.join(", "))
                }
            },
            What::GitPointer => "git pointer to another directory".to_string(),
            What::ProjectFile => "editor/agent project file".to_string(),
            What::Executable => "executable in $PATH".to_string(),
        };
        out.push(Planted {
            path: path.clone(),
            what: format!("{age} {kind}"),
        });
    }
    out
}

/// The keys of a git config that ordinary git work does not write and `allow` does not
/// name (`gitconfig::refused`): what makes it run code outside.
pub fn config_keys(text: &[u8], allow: &[String]) -> Vec<String> {
    crate::policy::gitconfig::refused(text, allow)
}

impl std::fmt::Display for Planted {
    /// "PATH (what)", as the lines and the session log name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.what)
    }
}

fn listed(all: &[Planted]) -> String {
    all.iter()
        .map(Planted::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The one line for the terminal, or `None` when nothing was planted.
pub fn line(planted: &[Planted]) -> Option<String> {
    if planted.is_empty() {
        return None;
    }
    Some(left_outside(&listed(planted)))
}

/// The end line for what the session left that runs outside, named.
fn left_outside(named: &str) -> String {
    crate::sys::say::hinted(
        format_args!("this session left code that runs outside the sandbox: {named}"),
        "look at each before a program outside uses it (`sbx-shell log --json` keeps this list)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_git_work_does_not_write_are_named() {
        let text = b"[core]\n\tbare = false\n\tfsmonitor = ./x\n[alias]\n\tst = status\n[filter \"lfs\"]\n\tclean = git-lfs clean\n[include]\n\tpath = ../evil\n";
        assert_eq!(
            config_keys(text, &[]),
            [
                "core.fsmonitor",
                "alias.st",
                "filter.lfs.clean",
                "include.path"
            ]
        );
        assert_eq!(
            config_keys(text, &["alias.*".into(), "filter.lfs.*".into()]),
            ["core.fsmonitor", "include.path"]
        );
        assert!(config_keys(b"[core]\n\trepositoryformatversion = 0\n", &[]).is_empty());
    }

    #[test]
    fn new_and_changed_places_are_reported_and_unchanged_ones_are_not() {
        let print = |len| Print {
            len,
            mtime_ns: 1,
            ino: 1,
            mode: 0o644,
        };
        let mut before = Snapshot::default();
        before
            .0
            .insert("/w/.git/config".into(), (What::GitConfig, print(10)));
        before
            .0
            .insert("/w/.git/hooks/pre-commit".into(), (What::GitHook, print(5)));
        let mut after = before.clone();
        after
            .0
            .insert("/w/.git/config".into(), (What::GitConfig, print(30)));
        after.0.insert(
            "/w/sub/.git/hooks/post-checkout".into(),
            (What::GitHook, print(5)),
        );
        let read = |_: &Path| Some(b"[core]\n\tpager = evil\n".to_vec());
        let planted = compare(&before, &after, &read, &[]);
        let got: Vec<(String, String)> = planted
            .iter()
            .map(|p| (p.path.display().to_string(), p.what.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "/w/.git/config".into(),
                    "changed git config (core.pager)".into()
                ),
                (
                    "/w/sub/.git/hooks/post-checkout".into(),
                    "new git hook".into()
                ),
            ]
        );
        assert!(line(&planted)
            .unwrap()
            .contains("/w/sub/.git/hooks/post-checkout (new git hook)"));
        assert_eq!(line(&[]), None);
        // A config that cannot be read whole as a file (a FIFO, too large) is named; one
        // with only the keys git work writes is not.
        let unreadable = compare(&before, &after, &|_: &Path| None, &[]);
        assert_eq!(
            unreadable[0].what,
            "changed git config that cannot be read whole as a file"
        );
        let plain = |_: &Path| Some(b"[core]\n\tbare = false\n".to_vec());
        let ordinary = compare(&before, &after, &plain, &[]);
        assert!(ordinary.iter().all(|p| p.what != "changed git config"));
        assert_eq!(ordinary.len(), 1);
    }
}
