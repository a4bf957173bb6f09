//! Which new names nothing in a session may make, inside a writable tree: the rule the
//! helper's guard applies to every call that makes a name (`sandbox::mediated::creating`),
//! before it makes it on the program's behalf (`create.rs`). Pure.
//!
//! A mount protects what exists, and Landlock's rights are per hierarchy, not per name: a
//! protected path missing at the start, or a hook of a repository made during the session,
//! sits in a directory the program must be able to write. Here it is refused by name
//! (EACCES), so it never exists, not even for an instant. Before Linux 5.14 nothing can
//! (`sandbox::unjudged`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a call would make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// A new, empty directory (`mkdir`).
    Dir,
    /// A directory renamed into place: it brings what it holds.
    MovedDir,
    /// A new, empty regular file (an open with O_CREAT of a missing name).
    File,
    /// A symlink, a node, a hard link, or a non-directory renamed into place.
    Other,
}

/// What the directory of the new name is, among git's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitPlace {
    /// None of the below.
    Plain,
    /// A git directory (`gitdir::is_git_dir`); `linked`:
    /// a linked worktree's (`worktrees/NAME` of another git directory), where git itself
    /// writes `commondir`.
    GitDir { linked: bool },
    /// `hooks` of a git directory.
    Hooks,
}

/// The names refused in a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Names {
    /// The policy's protected paths (real paths): none may be made, nor anything but a new
    /// directory where one of their ancestors belongs. (Inside one that exists, its mount
    /// or seal refuses; a writable root may lie inside one: the private home inside
    /// sbx-shell's state directory.)
    pub protected: Vec<PathBuf>,
    /// git config keys allowed besides `gitconfig::ALLOWED` (the policy's `git_config_allow`).
    #[serde(default)]
    pub git_config_allow: Vec<String>,
    /// The protected files that exist at the start, by `(st_dev, st_ino)`: every git config
    /// in the writable trees and the policy's protected files. A file is protected under
    /// every name: a writing open that reaches one through another name (a hard link made
    /// before the session) is refused, and so is a new name for one.
    #[serde(default)]
    pub objects: Vec<(u64, u64)>,
    /// What exists at the start and may not be renamed away, nor any directory above it
    /// inside a writable tree (bwrap pins those by a mount, Landlock cannot): the existing
    /// protected paths and the git directories of the writable trees. Renaming the
    /// directory that holds a protected file would carry the protection away from its path.
    #[serde(default)]
    pub pinned: Vec<PathBuf>,
    /// A home directory that the workspace holds, and the names besides dot names that no
    /// new entry at its top may have (`sandbox::bwrap::HOME_READONLY`): they configure
    /// what runs outside (`~/.bashrc`, `~/.config/…`, `~/bin`). Ordinary names are made.
    #[serde(default)]
    pub home: Option<(PathBuf, Vec<String>)>,
    /// The writable trees: one inside a protected path (the private home inside
    /// sbx-shell's state directory) is writable all the same.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
}

impl Names {
    /// Why `name` may not be made in the directory at `parent` (`git`: what that
    /// directory is), or `None` when it may. The rules, besides the protected paths: no
    /// `.git` that is not a directory (a pointer to a git directory elsewhere, whose config
    /// the host's git would read), no `commondir` in a git directory other than a linked
    /// worktree's, no hook other than a `*.sample`, and no directory renamed into place as a
    /// `.git`, or as `hooks` of a git directory (it would bring what the rules refuse one
    /// by one) — none of them made
    /// by `status`, `add`, `commit`, `branch`, `checkout`, `merge`, `log`, `init`,
    /// `clone` or `fetch`.
    pub fn refused(
        &self,
        parent: &Path,
        name: &OsStr,
        made: Made,
        git: GitPlace,
    ) -> Option<&'static str> {
        let bytes = name.as_encoded_bytes();
        // A new `.git` file (a linked worktree's, a submodule's: `git worktree add`
        // writes it) may point only at a git directory, and every git directory the
        // program can write is judged by these rules. A `.git` symlink, link or file
        // renamed into place would re-point an existing name (`refused_write` keeps an
        // existing one as it is), and a directory moved in as `.git` brings what it held
        // unjudged.
        match made {
            Made::Other if bytes == b".git" => return Some("a .git pointer put in place"),
            Made::MovedDir if bytes == b".git" => return Some("a directory moved in as .git"),
            // git's operation state that can run a program is written only through the
            // guard's own files (`helper::mediator::statefiles`); a directory of it moved in
            // would bring files nobody judged.
            Made::Other | Made::MovedDir
                if crate::protect::gitstate::state_file(parent, bytes).is_some() =>
            {
                return Some("git's operation state not written by git")
            }
            // (A symlink by that name would lead git to files judged by no rule.)
            Made::Other | Made::MovedDir if crate::protect::gitstate::is_state_dir(bytes) => {
                return Some("git's operation state moved in or linked")
            }
            _ => {}
        }
        match git {
            GitPlace::GitDir { .. } if is_config(name) && made != Made::Dir => {
                // git writes it by a rename only (`config.lock`), which `config_rename`
                // checks; made any other way it is refused.
                return Some("a git config not written by git's rename");
            }
            GitPlace::GitDir { linked: false } if bytes == b"commondir" => {
                return Some("a git commondir")
            }
            GitPlace::GitDir { .. } if bytes == b"hooks" && made == Made::MovedDir => {
                return Some("a directory moved in as git hooks")
            }
            // A `hooks` symlink would lead git to hooks nobody judges as hooks.
            GitPlace::GitDir { .. } if bytes == b"hooks" && made != Made::Dir => {
                return Some("a git hooks that is not a directory")
            }
            GitPlace::Hooks if made != Made::Dir && !bytes.ends_with(b".sample") => {
                return Some("a git hook")
            }
            // What git makes of its own directory is judged by the rules above, wherever
            // the policy names it (`.git/hooks` of the workspace, missing before `git
            // init`): a new `hooks` directory is git's, a hook in it is not.
            GitPlace::GitDir { .. } if GIT_OWN.contains(&bytes) => return None,
            _ => {}
        }
        if let Some((home, readonly)) = &self.home {
            let top = bytes.starts_with(b".") || readonly.iter().any(|r| r.as_bytes() == bytes);
            if same(parent, home) && top {
                return Some("a dot name or ~/bin at the top of the home");
            }
        }
        let path = parent.join(name);
        // Inside a protected directory (git's own places were judged above).
        if git == GitPlace::Plain && self.guards(&path) {
            return Some("a protected path");
        }
        for p in &self.protected {
            if same(p, &path) {
                return Some("a protected path");
            }
            if made != Made::Dir && under(p, &path) {
                return Some("where a protected path's directory belongs");
            }
        }
        None
    }
}

/// Whether `path` is `dir` or lies inside it: `Path::starts_with` for paths as the kernel
/// names them (absolute, no `.` or `..`, no doubled or trailing slash), compared as bytes —
/// the guard asks this for every name the program makes, against every protected path.
pub fn under(path: &Path, dir: &Path) -> bool {
    let (path, dir) = (path.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
    let dir = dir.strip_suffix(b"/").unwrap_or(dir);
    path.starts_with(dir) && matches!(path.get(dir.len()), None | Some(b'/'))
}

/// Whether two paths as the kernel names them are the same, compared as bytes (`Path`'s
/// own `==` compares component by component).
pub fn same(a: &Path, b: &Path) -> bool {
    a.as_os_str().as_encoded_bytes() == b.as_os_str().as_encoded_bytes()
}

/// A set of directories (paths as the kernel names them), asked whether a path is one of
/// them or lies inside one: by looking up each of the path's ancestors, not by comparing
/// it with every member — the guard asks this for every name the program makes, against
/// hundreds of Landlock rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathSet(std::collections::HashSet<Vec<u8>, std::hash::BuildHasherDefault<FastHasher>>);

/// A hasher for the guard's lookups, which it makes several times per call: eight bytes
/// per multiplication. Its keys are paths the policy names and ids the kernel hands out; a
/// program that chose paths to collide would only slow its own calls.
#[derive(Debug, Default, Clone, Copy)]
pub struct FastHasher(u64);

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let mut last = [0u8; 8];
        let rest = chunks.remainder();
        last[..rest.len()].copy_from_slice(rest);
        self.add(u64::from_le_bytes(last) ^ (rest.len() as u64) << 56);
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

impl PathSet {
    pub fn new<'a>(paths: impl IntoIterator<Item = &'a Path>) -> PathSet {
        PathSet(
            paths
                .into_iter()
                .map(|p| {
                    let b = p.as_os_str().as_encoded_bytes();
                    let b = if b.len() > 1 {
                        b.strip_suffix(b"/").unwrap_or(b)
                    } else {
                        b
                    };
                    b.to_vec()
                })
                .collect(),
        )
    }

    /// Whether `path` is a member or lies inside one (`under` some member).
    pub fn holds(&self, path: &Path) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let mut at = path.as_os_str().as_encoded_bytes();
        loop {
            if self.0.contains(at) {
                return true;
            }
            match at.iter().rposition(|b| *b == b'/') {
                // The root, last.
                Some(0) if at.len() > 1 => at = b"/",
                Some(0) | None => return false,
                Some(i) => at = &at[..i],
            }
        }
    }
}

/// Whether `refused` tells a directory renamed into place as `name` from anything else
/// renamed there (`Made::MovedDir` against `Made::Other`): so whether the guard must look
/// at what is renamed. Everywhere else both are refused or allowed alike.
pub fn kind_matters(name: &OsStr) -> bool {
    matches!(
        name.as_encoded_bytes(),
        b".git" | b"hooks" | b"config" | b"config.worktree"
    ) || crate::protect::gitstate::is_state_dir(name.as_encoded_bytes())
}

/// `config` or `config.worktree`: what git reads its configuration from in a git directory.
pub fn is_config(name: &OsStr) -> bool {
    matches!(name.as_encoded_bytes(), b"config" | b"config.worktree")
}

/// Whether `path` is what the guard judges in a git directory of `git_dirs` (or one named
/// `.git`) and no mount or record may stand in the way of: its config files, which git
/// rewrites by renaming a lock file over them, and `objects/info`, where `git gc` and
/// `repack` write, and where a tool's own repository borrows objects (`alternates`: data,
/// never code; opencode's snapshots need it).
pub fn is_judged_git_path(path: &Path, git_dirs: &[crate::protect::repos::GitDir]) -> bool {
    let git_dir =
        |d: &Path| git_dirs.iter().any(|g| g.dir == d) || d.file_name() == Some(OsStr::new(".git"));
    let config = path.file_name().is_some_and(is_config) && path.parent().is_some_and(git_dir);
    let info = path.file_name() == Some(OsStr::new("info"))
        && path.parent().is_some_and(|o| {
            o.file_name() == Some(OsStr::new("objects")) && o.parent().is_some_and(git_dir)
        });
    config || info
}

/// Why an existing entry `name` of a directory (`git`: what it is) may not be opened for
/// writing, or `None`: what may not be made there may not be rewritten either. git itself
/// never writes a config in place (it renames a lock file over it), a hook or a
/// `commondir` outside a linked worktree at all.
pub fn refused_write(name: &OsStr, git: GitPlace) -> Option<&'static str> {
    let bytes = name.as_encoded_bytes();
    if bytes == b".git" {
        return Some("a .git pointer rewritten");
    }
    match git {
        GitPlace::GitDir { .. } if is_config(name) => Some("a git config written in place"),
        GitPlace::GitDir { linked: false } if bytes == b"commondir" => Some("a git commondir"),
        GitPlace::Hooks if !bytes.ends_with(b".sample") => Some("a git hook"),
        _ => None,
    }
}

/// Whether a writing open of `name` needs `refused_write`'s look at its directory.
pub fn write_judged(name: &OsStr) -> bool {
    // A hook may have any name: every entry of a `hooks` directory is looked at, which
    // `git_place` does by the directory's name first (cheap for the rest).
    !name.as_encoded_bytes().ends_with(b".sample")
}

impl Names {
    /// Whether `path` is a protected path or lies inside one, and no writable tree lies
    /// between them: nothing there may be made or written (a mount refuses it under bwrap;
    /// with Landlock alone this is what refuses it).
    pub fn guards(&self, path: &Path) -> bool {
        self.protected.iter().any(|p| {
            under(path, p)
                && !self
                    .writable
                    .iter()
                    .any(|w| !same(w, p) && under(w, p) && under(path, w))
        })
    }

    /// Whether renaming `path` away would carry a pinned path with it (`pinned`).
    pub fn pinned(&self, path: &Path) -> bool {
        self.pinned.iter().any(|p| under(p, path))
    }

    /// Whether the file `(dev, ino)` is protected (`objects`).
    pub fn is_protected_object(&self, dev: u64, ino: u64) -> bool {
        self.objects.contains(&(dev, ino))
    }

    /// The keys for which a file with `text` may not be renamed over the config of the git
    /// directory at `git_dir`, or `None`: it sets a key that ordinary git work does not write and the
    /// policy does not allow (`gitconfig::refused`), git cannot read it, or its
    /// `core.worktree` leads outside the writable trees (the host's git would check out,
    /// reset and stash into that directory: a home's rc files).
    pub fn config_rename(&self, git_dir: &Path, text: &[u8]) -> Option<Vec<String>> {
        let mut keys = crate::policy::gitconfig::refused(text, &self.git_config_allow);
        if keys.is_empty() && !self.worktree_inside(git_dir, text) {
            keys.push("core.worktree (outside the writable places)".to_string());
        }
        (!keys.is_empty()).then_some(keys)
    }

    /// Whether the `core.worktree` that `text` sets (the last one, as git reads it; none
    /// set is inside) names a directory inside a writable tree, read as git reads it:
    /// relative to the git directory, `..` taken lexically.
    fn worktree_inside(&self, git_dir: &Path, text: &[u8]) -> bool {
        let Ok(entries) = crate::policy::gitconfig::parse(text) else {
            return false;
        };
        let Some(value) = entries
            .iter()
            .rev()
            .find(|e| e.key == b"core.worktree")
            .map(|e| e.value.clone().unwrap_or_default())
        else {
            return true;
        };
        let mut at = PathBuf::new();
        for part in git_dir.join(OsStr::from_bytes(&value)).components() {
            match part {
                std::path::Component::ParentDir => {
                    at.pop();
                }
                std::path::Component::CurDir => {}
                other => at.push(other),
            }
        }
        !value.is_empty() && self.writable.iter().any(|w| under(&at, w))
    }
}

/// The entries of a git directory that the git rules of `Names::refused` judge.
const GIT_OWN: [&[u8]; 4] = [b"hooks", b"config", b"config.worktree", b"commondir"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_renamed_into_place_is_told_apart_only_where_kind_matters_says() {
        let names = Names {
            protected: vec!["/ws/.mcp.json".into(), "/ws/.claude/settings.json".into()],
            home: Some(("/h".into(), vec!["bin".into()])),
            ..Names::default()
        };
        let places = [
            GitPlace::Plain,
            GitPlace::GitDir { linked: false },
            GitPlace::GitDir { linked: true },
            GitPlace::Hooks,
        ];
        let parents = [
            "/ws",
            "/ws/.git",
            "/ws/.git/hooks",
            "/h",
            "/ws/.claude",
            "/ws/sub",
        ];
        let all = [
            ".git",
            "hooks",
            "config",
            "config.worktree",
            ".gitmodules",
            "commondir",
            "HEAD",
            "objects",
            "refs",
            "pre-commit",
            "x.sample",
            ".mcp.json",
            ".claude",
            "settings.json",
            ".bashrc",
            "bin",
            "notes",
            "a.txt",
        ];
        for name in all {
            for git in places {
                for parent in parents {
                    let as_other =
                        names.refused(Path::new(parent), OsStr::new(name), Made::Other, git);
                    let as_dir =
                        names.refused(Path::new(parent), OsStr::new(name), Made::MovedDir, git);
                    if !kind_matters(OsStr::new(name)) {
                        assert_eq!(
                            as_other.is_some(),
                            as_dir.is_some(),
                            "{parent}/{name} {git:?}"
                        );
                    }
                }
            }
        }
        assert!(kind_matters(OsStr::new("hooks")));
    }

    #[test]
    fn gits_operation_state_is_made_only_as_git_makes_it() {
        let names = Names::default();
        let refused = |parent: &str, name: &str, made| {
            names
                .refused(Path::new(parent), OsStr::new(name), made, GitPlace::Plain)
                .is_some()
        };
        for (parent, name) in [
            ("/ws/.git/rebase-merge", "git-rebase-todo"),
            ("/ws/.git/rebase-merge", "strategy"),
            ("/ws/x/rebase-merge", "git-rebase-todo"),
            ("/ws/.git/sequencer", "opts"),
        ] {
            // Written or renamed into place through the guard (`statefiles`), never a
            // link, a symlink, a node or a directory.
            assert!(refused(parent, name, Made::Other), "{parent}/{name}");
            assert!(refused(parent, name, Made::MovedDir), "{parent}/{name}");
            assert!(!refused(parent, name, Made::File), "{parent}/{name}");
        }
        for name in ["rebase-merge", "sequencer"] {
            assert!(!refused("/ws/.git", name, Made::Dir), "{name}");
            assert!(refused("/ws/.git", name, Made::MovedDir), "{name}");
            assert!(refused("/ws/.git", name, Made::Other), "{name}: a symlink");
        }
        for (parent, name) in [
            ("/ws/.git/rebase-merge", "done"),
            ("/ws/.git/sequencer", "todo"),
            ("/ws/.git", "git-rebase-todo"),
        ] {
            assert!(!refused(parent, name, Made::Other), "{parent}/{name}");
        }
    }

    #[test]
    fn a_path_set_holds_its_members_and_what_lies_inside_them() {
        let set = PathSet::new([Path::new("/ws"), Path::new("/h/.cache/"), Path::new("/x/y")]);
        for yes in ["/ws", "/ws/a/b", "/h/.cache", "/h/.cache/pip", "/x/y/z"] {
            assert!(set.holds(Path::new(yes)), "{yes}");
        }
        for no in ["/", "/wsx", "/w", "/h", "/x", "/x/yz", "/h/.cachex/a"] {
            assert!(!set.holds(Path::new(no)), "{no}");
        }
        let root = PathSet::new([Path::new("/")]);
        assert!(root.holds(Path::new("/")) && root.holds(Path::new("/etc/passwd")));
        assert!(!PathSet::default().holds(Path::new("/")));
    }

    #[test]
    fn a_path_is_under_a_directory_as_path_starts_with_says() {
        for (path, dir) in [
            ("/ws/a", "/ws"),
            ("/ws", "/ws"),
            ("/ws/a/b", "/ws/a"),
            ("/x", "/"),
            ("/", "/"),
            ("/ws/a", "/ws/"),
            ("/wsx", "/ws"),
            ("/ws", "/ws/a"),
            ("/w", "/ws"),
            ("/ws/ab", "/ws/a"),
        ] {
            assert_eq!(
                under(Path::new(path), Path::new(dir)),
                Path::new(path).starts_with(dir),
                "{path} under {dir}"
            );
        }
    }

    #[test]
    fn protected_paths_git_pointers_and_hooks_are_refused_and_the_rest_is_not() {
        let names = Names {
            protected: vec![
                "/ws/.mcp.json".into(),
                "/ws/.vscode".into(),
                "/ws/.claude/settings.json".into(),
                "/h/.config/sbx-shell".into(),
            ],
            ..Names::default()
        };
        let plain = GitPlace::Plain;
        let refused = |parent: &str, name: &str, made, git| {
            names.refused(Path::new(parent), OsStr::new(name), made, git)
        };
        use Made::{Dir, MovedDir, Other};
        // Protected paths, missing at the start.
        assert_eq!(
            refused("/ws", ".mcp.json", Other, plain),
            Some("a protected path")
        );
        assert_eq!(
            refused("/ws", ".vscode", Dir, plain),
            Some("a protected path")
        );
        assert!(refused("/ws", ".vscode", MovedDir, plain).is_some());
        assert!(refused("/h/.config", "sbx-shell", Dir, plain).is_some());
        // Inside one: refused, unless a writable tree lies between (the private home lies
        // in the state directory).
        assert!(refused("/ws/.vscode", "tasks.json", Other, plain).is_some());
        assert!(refused("/h/.config/sbx-shell", "config.json", Other, plain).is_some());
        let with_home = Names {
            writable: vec!["/h/.config/sbx-shell/home".into()],
            ..names.clone()
        };
        assert_eq!(
            with_home.refused(
                Path::new("/h/.config/sbx-shell/home"),
                OsStr::new("f"),
                Other,
                plain
            ),
            None
        );
        assert!(with_home.guards(Path::new("/ws/.vscode/settings.json")));
        assert!(with_home.guards(Path::new("/ws/.mcp.json")));
        assert!(!with_home.guards(Path::new("/ws/.mcp.json.bak")));
        assert!(!with_home.guards(Path::new("/h/.config/sbx-shell/home/x")));
        // Their missing ancestors: as new directories only, not moved in with content.
        assert_eq!(refused("/ws", ".claude", Dir, plain), None);
        assert!(refused("/ws", ".claude", Other, plain).is_some());
        assert!(refused("/ws", ".claude", MovedDir, plain).is_some());
        assert!(refused("/ws/.claude", "settings.json", Other, plain).is_some());
        assert_eq!(refused("/ws/.claude", "notes.md", Other, plain), None);
        // Git.
        assert_eq!(
            refused("/ws/sub", ".git", Made::File, plain),
            None,
            "a worktree's pointer file"
        );
        assert!(
            refused("/ws/sub", ".git", Other, plain).is_some(),
            "a .git symlink"
        );
        assert!(refused_write(OsStr::new(".git"), plain).is_some());
        // A work tree's `.gitmodules` is data to git (it refuses `update = !command` there).
        assert_eq!(refused("/ws", ".gitmodules", Made::File, plain), None);
        assert_eq!(refused_write(OsStr::new(".gitmodules"), plain), None);
        assert_eq!(refused("/ws/sub", ".git", Dir, plain), None, "git init");
        let git = GitPlace::GitDir { linked: false };
        let linked = GitPlace::GitDir { linked: true };
        assert!(refused("/ws/.git", "commondir", Other, git).is_some());
        assert_eq!(
            refused("/ws/.git/worktrees/wt", "commondir", Other, linked),
            None
        );
        for ordinary in [
            "index.lock",
            "HEAD",
            "ORIG_HEAD",
            "config.lock",
            "packed-refs",
        ] {
            assert_eq!(
                refused("/ws/.git", ordinary, Other, git),
                None,
                "{ordinary}"
            );
        }
        // A config: only by git's rename (checked by `config_rename`), never written in place.
        assert!(refused("/ws/.git", "config", Other, git).is_some());
        assert!(refused("/ws/.git", "config.worktree", Other, linked).is_some());
        assert_eq!(refused("/ws/src", "config", Other, plain), None);
        assert!(refused_write(OsStr::new("config"), git).is_some());
        assert!(refused_write(OsStr::new("pre-commit"), GitPlace::Hooks).is_some());
        assert!(refused_write(OsStr::new("commondir"), git).is_some());
        assert_eq!(refused_write(OsStr::new("commondir"), linked), None);
        assert_eq!(refused_write(OsStr::new("config"), plain), None);
        assert_eq!(refused_write(OsStr::new("index"), git), None);
        assert_eq!(
            names.config_rename(
                Path::new("/ws/.git"),
                b"[core]\n\tbare = false\n[user]\n\tname = x\n"
            ),
            None
        );
        assert!(names
            .config_rename(Path::new("/ws/.git"), b"[core] fsmonitor = /x.sh\n")
            .is_some_and(|keys| keys == ["core.fsmonitor"]));
        assert!(names
            .config_rename(Path::new("/ws/.git"), b"[alias]\n\tst = !touch /x\n")
            .is_some());
        assert!(names
            .config_rename(Path::new("/ws/.git"), b"[pager]\n\tstatus = x\n")
            .is_some());
        let lfs = Names {
            git_config_allow: vec!["filter.lfs.*".into()],
            ..Names::default()
        };
        assert_eq!(
            lfs.config_rename(
                Path::new("/ws/.git"),
                b"[filter \"lfs\"]\n\tclean = git-lfs clean\n"
            ),
            None
        );
        // `core.worktree`: inside the writable trees only, read from the git directory.
        let ws = Names {
            writable: vec!["/ws".into(), "/tmp/s".into()],
            ..Names::default()
        };
        for (git_dir, value, inside) in [
            ("/ws/.git", "..", true),
            ("/ws/.git/modules/sm", "../../../sm", true),
            ("/ws/.git", "/ws/other/tree", true),
            ("/ws/.git", "/tmp/s/x", true),
            ("/ws/.git", "../..", false),
            ("/ws/.git", "/home/u", false),
            ("/ws/.git", "../../home/u", false),
            ("/ws/.git", "/ws/../home", false),
            ("/ws/.git", "/wsx", false),
            ("/ws/.git", "", false),
        ] {
            let text = format!("[core]\n\tworktree = /ws\n\tworktree = \"{value}\"\n");
            let got = ws.config_rename(Path::new(git_dir), text.as_bytes());
            assert_eq!(got.is_none(), inside, "{git_dir} {value:?}: {got:?}");
        }
        // A tool's own repository may borrow objects (opencode's snapshots).
        assert_eq!(
            refused("/ws/.git/objects/info", "alternates", Other, plain),
            None
        );
        assert!(refused("/ws/.git/hooks", "pre-commit", Other, GitPlace::Hooks).is_some());
        assert!(refused("/ws/.git/hooks", "pre-commit", MovedDir, GitPlace::Hooks).is_some());
        assert!(refused("/ws/sub", ".git", MovedDir, plain).is_some());
        assert_eq!(refused("/ws/.git", "hooks", Dir, git), None, "git init");
        let ws_hooks = Names {
            protected: vec!["/ws/.git/hooks".into(), "/ws/.git/config".into()],
            ..Names::default()
        };
        assert_eq!(
            ws_hooks.refused(Path::new("/ws/.git"), OsStr::new("hooks"), Dir, git),
            None,
            "git init in the workspace, where .git/hooks is a protected path"
        );
        assert!(ws_hooks
            .refused(Path::new("/ws/.git"), OsStr::new("hooks"), MovedDir, git)
            .is_some());
        assert!(refused("/ws/.git", "hooks", MovedDir, git).is_some());
        // Nor as a symlink, a link or a file: git would follow it to hooks nobody judges.
        assert!(refused("/ws/.git", "hooks", Other, git).is_some());
        assert!(refused("/ws/.git", "hooks", Made::File, linked).is_some());
        assert_eq!(
            refused(
                "/ws/.git/hooks",
                "pre-commit.sample",
                Other,
                GitPlace::Hooks
            ),
            None,
            "git init's templates"
        );
        // A home workspace: ordinary names at its top, no dot names and no `bin`.
        let home = Names {
            home: Some(("/h".into(), vec!["bin".into()])),
            ..Names::default()
        };
        for (name, made) in [("todo.txt", Other), ("notes", Dir), ("repo", MovedDir)] {
            assert_eq!(
                home.refused(Path::new("/h"), OsStr::new(name), made, plain),
                None
            );
        }
        for name in [".bashrc", ".config", "bin", ".local"] {
            assert!(home
                .refused(Path::new("/h"), OsStr::new(name), Dir, plain)
                .is_some());
        }
        assert_eq!(
            home.refused(Path::new("/h/notes"), OsStr::new(".x"), Other, plain),
            None
        );
        // Elsewhere: ordinary work.
        for (parent, name) in [
            ("/ws", "main.rs"),
            ("/ws", "hooks"),
            ("/ws/src", "commondir"),
        ] {
            assert_eq!(refused(parent, name, Other, plain), None, "{name}");
        }
        assert_eq!(refused("/ws", ".mcp.json.bak", Other, plain), None);
    }
}
