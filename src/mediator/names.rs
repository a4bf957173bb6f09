//! Which new names nothing in a session may make, inside a writable tree: the rule the
//! helper's guard applies to every call that makes a name (`sandbox::mediated::creating`),
//! before it makes it on the program's behalf (`create.rs`). Pure.
//!
//! A mount protects what exists, and Landlock's rights are per hierarchy, not per name: a
//! protected path missing at the start, or a hook of a repository made during the session,
//! sits in a directory the program must be able to write. Here it is refused by name
//! (EACCES), so it never exists — not even for the instant the guard (`guard`) would take
//! to move it aside.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a call would make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// A new, empty directory (`mkdir`).
    Dir,
    /// A directory renamed into place: it brings what it holds.
    MovedDir,
    /// A file, a symlink, a node, a hard link, or a non-directory renamed into place.
    Other,
}

/// What the directory of the new name is, among git's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitPlace {
    /// None of the below.
    Plain,
    /// A git directory (named `.git`, or holding `HEAD`, `objects` and `refs`); `linked`:
    /// a linked worktree's (`worktrees/NAME` of another git directory), where git itself
    /// writes `commondir`.
    GitDir { linked: bool },
    /// `hooks` of a git directory.
    Hooks,
    /// `objects/info` of a git directory.
    ObjectsInfo,
    /// `objects` of a git directory.
    Objects,
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
}

impl Names {
    /// Why `name` may not be made in the directory at `parent` (`git`: what that
    /// directory is), or `None` when it may. The rules, besides the protected paths: no
    /// `.git` that is not a directory (a pointer to a git directory elsewhere, whose config
    /// the host's git would read), no `commondir` in a git directory other than a linked
    /// worktree's, no `alternates` in `objects/info`, no hook other than a `*.sample`, and
    /// no directory renamed into place as a `.git`, or as `hooks` or `objects/info` of a
    /// git directory (it would bring what the rules refuse one by one) — none of them made
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
        match made {
            Made::Other if bytes == b".git" => return Some("a .git pointer file"),
            Made::MovedDir if bytes == b".git" => return Some("a directory moved in as .git"),
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
            GitPlace::Objects if bytes == b"info" && made == Made::MovedDir => {
                return Some("a directory moved in as objects/info")
            }
            GitPlace::ObjectsInfo if bytes == b"alternates" => return Some("git alternates"),
            GitPlace::Hooks if made != Made::Dir && !bytes.ends_with(b".sample") => {
                return Some("a git hook")
            }
            _ => {}
        }
        let path = parent.join(name);
        for p in &self.protected {
            if *p == path {
                return Some("a protected path");
            }
            if made != Made::Dir && p.starts_with(&path) {
                return Some("where a protected path's directory belongs");
            }
        }
        None
    }
}

/// `config` or `config.worktree`: what git reads its configuration from in a git directory.
pub fn is_config(name: &OsStr) -> bool {
    matches!(name.as_encoded_bytes(), b"config" | b"config.worktree")
}

/// Why an existing entry `name` of a directory (`git`: what it is) may not be opened for
/// writing, or `None`. git itself never writes a config in place (it renames a lock file
/// over it), so only a program planting a key would.
pub fn refused_write(name: &OsStr, git: GitPlace) -> Option<&'static str> {
    match git {
        GitPlace::GitDir { .. } if is_config(name) => Some("a git config written in place"),
        _ => None,
    }
}

/// Why a file with `text` may not be renamed over a git directory's config, or `None`: it
/// holds a key that runs a command (`planted::config_keys`).
pub fn config_rename(text: &str) -> Option<String> {
    let keys = crate::planted::config_keys(text);
    (!keys.is_empty()).then(|| format!("a git config ({})", keys.join(", ")))
}

/// The entries whose presence makes a directory a git directory (with the other two).
pub const GIT_MARKERS: [&str; 3] = ["HEAD", "objects", "refs"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_paths_git_pointers_and_hooks_are_refused_and_the_rest_is_not() {
        let names = Names {
            protected: vec![
                "/ws/.mcp.json".into(),
                "/ws/.vscode".into(),
                "/ws/.claude/settings.json".into(),
                "/h/.config/sbx-shell".into(),
            ],
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
        // Inside one: its mount or seal decides (the private home lies in the state dir).
        assert_eq!(
            refused("/h/.config/sbx-shell/home", "f", Other, plain),
            None
        );
        // Their missing ancestors: as new directories only, not moved in with content.
        assert_eq!(refused("/ws", ".claude", Dir, plain), None);
        assert!(refused("/ws", ".claude", Other, plain).is_some());
        assert!(refused("/ws", ".claude", MovedDir, plain).is_some());
        assert!(refused("/ws/.claude", "settings.json", Other, plain).is_some());
        assert_eq!(refused("/ws/.claude", "notes.md", Other, plain), None);
        // Git.
        assert!(
            refused("/ws/sub", ".git", Other, plain).is_some(),
            "pointer file"
        );
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
        assert_eq!(refused_write(OsStr::new("config"), plain), None);
        assert_eq!(refused_write(OsStr::new("index"), git), None);
        assert_eq!(
            config_rename("[core]\n\tbare = false\n[user]\n\tname = x\n"),
            None
        );
        assert!(config_rename("[core]\n\tfsmonitor = /x.sh\n").is_some());
        assert!(config_rename("[alias]\n\tst = !touch /x\n").is_some());
        assert!(refused(
            "/ws/.git/objects/info",
            "alternates",
            Other,
            GitPlace::ObjectsInfo
        )
        .is_some());
        assert_eq!(
            refused(
                "/ws/.git/objects/info",
                "packs",
                Other,
                GitPlace::ObjectsInfo
            ),
            None
        );
        assert!(refused("/ws/.git/hooks", "pre-commit", Other, GitPlace::Hooks).is_some());
        assert!(refused("/ws/.git/hooks", "pre-commit", MovedDir, GitPlace::Hooks).is_some());
        assert!(refused("/ws/sub", ".git", MovedDir, plain).is_some());
        assert_eq!(refused("/ws/.git", "hooks", Dir, git), None, "git init");
        assert!(refused("/ws/.git", "hooks", MovedDir, git).is_some());
        assert!(refused("/ws/.git/objects", "info", MovedDir, GitPlace::Objects).is_some());
        assert_eq!(
            refused("/ws/.git/objects", "info", Dir, GitPlace::Objects),
            None
        );
        assert_eq!(
            refused("/ws/.git/objects", "ab", MovedDir, GitPlace::Objects),
            None
        );
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
