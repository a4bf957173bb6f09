//! What a git directory is: one definition for every part that asks — the guard as names
//! are made (`helper::mediator::git`), the scan of the writable trees before and after a
//! session (`repos`), and `why`. Pure: each caller
//! says how it looks at a directory's entries.
//!
//! git accepts a directory as a git directory (`setup.c`, `is_git_directory`) when it
//! holds a valid `HEAD`, and an `objects` and a `refs` directory — both found through
//! `commondir` when it holds one (a linked worktree's `worktrees/NAME`). Here a directory
//! is one when it holds an entry `HEAD` and either entries `objects` and `refs` or an entry
//! `commondir`, whatever kind each is (a symlink too) and whatever they hold; and every
//! directory named `.git` is one. That is more than git accepts, never less (tested
//! against `git rev-parse --git-dir` over generated layouts): what git would trust is
//! never judged as an ordinary directory, and a directory becomes one, for these rules, no
//! later than for git.

use std::ffi::OsStr;

/// The entries that make a directory a git directory, with one another (`is_git_dir`).
pub const MARKERS: [&str; 4] = ["HEAD", "objects", "refs", "commondir"];

/// Whether the directory named `name` (its last component) whose entries `has` tells is
/// a git directory.
pub fn is_git_dir(name: Option<&OsStr>, has: impl Fn(&str) -> bool) -> bool {
    name == Some(OsStr::new(".git"))
        || (has("HEAD") && ((has("objects") && has("refs")) || has("commondir")))
}

/// Whether making the entry `made` in a directory that is not a git directory now (named
/// `name`, its entries as `has` tells) makes it one: the moment its contents must be what
/// a git directory may hold.
pub fn completes(name: Option<&OsStr>, made: &OsStr, has: impl Fn(&str) -> bool) -> bool {
    MARKERS.iter().any(|m| made == *m)
        && !is_git_dir(name, &has)
        && is_git_dir(name, |n| made == n || has(n))
}

#[cfg(test)]
mod tests;
