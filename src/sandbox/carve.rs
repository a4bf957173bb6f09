//! Writable trees with something left out, for Landlock alone. Pure.
//!
//! Landlock grants a tree; nothing inside can be taken back. Where a writable tree holds a
//! denied path (the home as the workspace: `~/.aws`), or the home's entries that bwrap's
//! seal keeps read-only (its dot entries and `HOME_READONLY`, `plan::How::SealDots`), the
//! tree gets no rule of its own: each entry gets one, but what is left out, recursively
//! down to it (`around`). The directories so **carved** keep the model a tree
//! would give, held by the guard, which makes every name the program makes: inside a
//! carved directory the program may make names and open files, except what is left out
//! (`Carved::holds`). A name made at the top of a carved directory would have no rule (a
//! rule belongs to an object that existed when the ruleset was made), so the guard puts a
//! **pool** entry there instead: an empty file or directory sbx-shell made beside it, on
//! the same mount, before the program started, each with a rule of its own
//! (`session::pool`, `mediator::pool`). What the pool cannot give — a name moved in from
//! elsewhere, a name made once the pool is empty — is readable only through the
//! descriptors the guard hands over.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::policy::config::FsMode;
use crate::policy::Filesystem;
use crate::protect::names::under;

/// How many files and directories each carved directory's pool holds.
pub const POOL_FILES: usize = 16;
pub const POOL_DIRS: usize = 8;
/// How many carved directories get a pool, the outermost first (the home, as the
/// workspace, is one).
pub const POOLS_AT_MOST: usize = 8;

/// A directory inside a writable tree whose entries have rules and itself none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Carved {
    pub dir: PathBuf,
    /// What is left out beneath it (denied paths, the home's sealed entries).
    pub left_out: Vec<PathBuf>,
}

impl Carved {
    /// Whether `path` lies in this directory's tree (itself included) outside what is
    /// left out: where the program may make names and open files, as in a writable tree.
    pub fn holds(&self, path: &Path) -> bool {
        under(path, &self.dir) && !self.left_out.iter().any(|l| under(path, l))
    }
}

/// A carved directory's pool: `files` and `dirs`, entries of `holder` (a directory of
/// sbx-shell's on the same mount), each with a read-write rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    pub dir: PathBuf,
    pub holder: PathBuf,
    pub files: Vec<String>,
    pub dirs: Vec<String>,
}

impl Pool {
    /// Every entry's path (each gets a read-write rule).
    pub fn entries(&self) -> impl Iterator<Item = PathBuf> + '_ {
        self.files
            .iter()
            .chain(&self.dirs)
            .map(|name| self.holder.join(name))
    }
}

/// What the writable trees leave out: the denied paths, and, when one holds the home in
/// workspace-write, the home's dot entries and `HOME_READONLY` (what `children` lists of
/// it, and those names) — except the writable trees themselves and what holds one.
pub fn left_out(
    fs: &Filesystem,
    writable: &[&Path],
    children: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs.denied.iter().map(|d| d.real().to_path_buf()).collect();
    let home = fs.home.real();
    if fs.mode == FsMode::WorkspaceWrite && writable.iter().any(|w| home.starts_with(w)) {
        let dots = children(home).into_iter().filter(|c| {
            c.file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
        });
        let named = super::plan::HOME_READONLY.iter().map(|n| home.join(n));
        out.extend(dots.chain(named));
    }
    out.sort();
    out.dedup();
    out
}

/// Alone, where the guard makes every name: the home, when a writable tree holds it in
/// workspace-write, and the names besides dot names that no new entry at its top may
/// have (`protect::names::Names::home`), as bwrap's seal (`plan::How::SealDots`).
pub fn sealed_home(fs: &Filesystem) -> Option<(PathBuf, Vec<String>)> {
    let home = fs.home.real();
    let holds = fs.writable_roots().iter().any(|w| home.starts_with(w));
    if fs.mode != FsMode::WorkspaceWrite || !holds || !home.is_absolute() {
        return None;
    }
    let guarded = fs.denied.iter().chain(&fs.protected).map(|p| p.real());
    let mut readonly: Vec<String> = super::plan::HOME_READONLY
        .iter()
        .map(|s| s.to_string())
        .chain(
            guarded
                .filter(|g| g.parent() == Some(home))
                .filter_map(|g| g.file_name()?.to_str().map(str::to_string))
                .filter(|name| !name.starts_with('.')),
        )
        .collect();
    readonly.sort();
    readonly.dedup();
    Some((home.to_path_buf(), readonly))
}

/// The writable tree `root` without `left_out`: the paths that get read-write rules, and
/// the directories carved (none when nothing left out lies inside it).
pub fn carve(
    root: &Path,
    left_out: &[PathBuf],
    children: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> (Vec<PathBuf>, Vec<Carved>) {
    let inside: Vec<&Path> = left_out
        .iter()
        .map(PathBuf::as_path)
        .filter(|l| l.starts_with(root) && *l != root)
        .collect();
    let (parts, dirs) = around(root, &inside, children);
    let carved = dirs
        .into_iter()
        .map(|dir| Carved {
            left_out: inside
                .iter()
                .filter(|l| l.starts_with(&dir))
                .map(|l| l.to_path_buf())
                .collect(),
            dir,
        })
        .collect();
    (parts, carved)
}

/// `root` as rules that leave out every `denied` path: `root` itself when none is inside
/// it, nothing when it is denied, else what `around` gives for each of its entries; with
/// the directories so carved (listed, not read).
pub(super) fn around(
    root: &Path,
    denied: &[&Path],
    children: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    if denied.iter().any(|d| root.starts_with(d)) {
        return (Vec::new(), Vec::new());
    }
    if !denied.iter().any(|d| d.starts_with(root)) {
        return (vec![root.to_path_buf()], Vec::new());
    }
    let mut out = (Vec::new(), vec![root.to_path_buf()]);
    for child in children(root) {
        let (parts, carved) = around(&child, denied, children);
        out.0.extend(parts);
        out.1.extend(carved);
    }
    out
}

/// The writable trees `writable`, `carving` them: without what they leave out
/// (`left_out`). The paths that get read-write rules, and the directories carved.
pub fn writable(
    fs: &Filesystem,
    writable: &[&Path],
    carving: bool,
    children: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> (Vec<PathBuf>, Vec<Carved>) {
    if !carving {
        return (
            writable.iter().map(|w| w.to_path_buf()).collect(),
            Vec::new(),
        );
    }
    let out = left_out(fs, writable, children);
    let mut parts = Vec::new();
    let mut carved = Vec::new();
    for root in writable {
        let (p, c) = carve(root, &out, children);
        parts.extend(p);
        carved.extend(c);
    }
    (parts, carved)
}

/// Whether `path` lies in a carved directory's tree, outside what it leaves out.
pub fn held(carved: &[Carved], path: &Path) -> bool {
    carved.iter().any(|c| c.holds(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(p: &Path) -> Vec<PathBuf> {
        let names: &[&str] = match p.to_str() {
            Some("/h") => &[
                "/h/.aws",
                "/h/.config",
                "/h/.cache",
                "/h/bin",
                "/h/proj",
                "/h/notes",
            ],
            Some("/h/.config") => &["/h/.config/gcloud", "/h/.config/nvim"],
            _ => &[],
        };
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn a_home_workspace_is_carved_around_its_dot_entries_and_denied_paths() {
        let left = vec![
            PathBuf::from("/h/.aws"),
            "/h/.cache".into(),
            "/h/.config".into(),
            "/h/bin".into(),
            "/h/secret".into(),
        ];
        let (parts, carved) = carve(Path::new("/h"), &left, &listing);
        assert_eq!(parts, vec![PathBuf::from("/h/proj"), "/h/notes".into()]);
        assert_eq!(carved.len(), 1);
        let home = &carved[0];
        assert_eq!(home.dir, Path::new("/h"));
        for yes in ["/h", "/h/new", "/h/proj/x", "/h/newdir/deep/file"] {
            assert!(home.holds(Path::new(yes)), "{yes}");
        }
        for no in [
            "/h/.aws/credentials",
            "/h/.config/x",
            "/h/bin/tool",
            "/h/secret",
            "/h2/x",
            "/",
        ] {
            assert!(!home.holds(Path::new(no)), "{no}");
        }
        // Nothing left out inside: the tree's own rule, nothing carved.
        let (parts, carved) = carve(Path::new("/h/proj"), &left, &listing);
        assert_eq!((parts, carved.len()), (vec![PathBuf::from("/h/proj")], 0));
    }

    #[test]
    fn a_writable_tree_inside_what_is_left_out_keeps_its_rule() {
        let left = [PathBuf::from("/h/.cache")];
        let (parts, carved) = carve(Path::new("/h/.cache"), &left, &listing);
        assert_eq!((parts, carved.len()), (vec![PathBuf::from("/h/.cache")], 0));
    }
}
