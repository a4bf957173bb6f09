//! git's state of an operation in progress that runs commands when the user continues it:
//! a rebase's todo (`rebase-merge/git-rebase-todo`), whose `exec` lines `git rebase
//! --continue` runs (after `git status` invites the user to). The sequencer's own todo
//! (`sequencer/todo`, cherry-pick and revert) accepts no other command than its own, and
//! `rebase-apply/` (am) none. Pure.
//!
//! Such lines are ordinary inside a session (`git rebase -x 'make test'`), and an editor
//! writes the todo in place, where no content can be judged when the file is opened. So
//! the model is: every state directory the session made, wrote into or moved is recorded
//! by the guard as it does it (`state_dir`, `moved`), and when the session has ended and
//! none of its processes remains, the todo there is read and its `exec` lines are turned
//! into comments (`disarm`), each named at the end of the session.

use std::path::{Path, PathBuf};

/// The directory of a rebase's state, in a git directory (a linked worktree's too).
pub const STATE_DIR: &str = "rebase-merge";

/// The todo in `STATE_DIR`.
pub const TODO: &str = "git-rebase-todo";

/// The state directory that making, writing or linking the entry `name` of the directory
/// `parent` touches, or `None`: `parent/name` when that is named `STATE_DIR`, `parent` when
/// it is. (Anything deeper reaches a todo only when it is moved there: that move names
/// one of the two.)
pub fn state_dir(parent: &Path, name: &[u8]) -> Option<PathBuf> {
    if name == STATE_DIR.as_bytes() {
        return Some(parent.join(STATE_DIR));
    }
    (parent.file_name().map(|n| n.as_encoded_bytes()) == Some(STATE_DIR.as_bytes()))
        .then(|| parent.to_path_buf())
}

/// Where the recorded state directory `dir` is after `from` was renamed to `to`: `None`
/// when the rename did not carry it.
pub fn moved(dir: &Path, from: &Path, to: &Path) -> Option<PathBuf> {
    let rest = dir.strip_prefix(from).ok()?;
    Some(match rest.as_os_str().is_empty() {
        true => to.to_path_buf(),
        false => to.join(rest),
    })
}

/// The prefix a disarmed line gets: a comment for git (its default comment character;
/// with another one configured, git stops at the line as an unknown command instead).
pub const DISARMED: &[u8] = b"# ";

/// `text` with every line that git's todo parser (`sequencer.c`, `parse_insn_line`) reads
/// as an `exec` — `exec` or `x` after optional blanks, then a blank or the line's end — made
/// a comment, and those lines (without their line ends), or `None` when it holds none.
pub fn disarm(text: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut lines = Vec::new();
    for line in text.split_inclusive(|b| *b == b'\n') {
        if is_exec(line) {
            out.extend_from_slice(DISARMED);
            let bare = line.strip_suffix(b"\n").unwrap_or(line);
            let bare = bare.strip_suffix(b"\r").unwrap_or(bare);
            lines.push(String::from_utf8_lossy(bare).trim().to_string());
        }
        out.extend_from_slice(line);
    }
    (!lines.is_empty()).then_some((out, lines))
}

fn is_exec(line: &[u8]) -> bool {
    let start = line
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .unwrap_or(line.len());
    let word = &line[start..];
    let rest = word
        .strip_prefix(b"exec")
        .or_else(|| word.strip_prefix(b"x"));
    rest.is_some_and(|r| matches!(r.first(), None | Some(b' ' | b'\t' | b'\r' | b'\n')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_lines_as_git_reads_them_become_comments() {
        let text = b"pick 1a c1\nexec make test\n  x\t./evil\r\n# exec not this\nexecute y\nxargs z\nx\nbreak\nexec";
        let (out, lines) = disarm(text).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "pick 1a c1\n# exec make test\n#   x\t./evil\r\n# exec not this\nexecute y\nxargs z\n# x\nbreak\n# exec"
        );
        assert_eq!(lines, ["exec make test", "x\t./evil", "x", "exec"]);
        assert_eq!(disarm(b"pick 1a c1\nbreak\n# exec z\n"), None);
        assert_eq!(disarm(b""), None);
    }

    #[test]
    fn the_state_directory_is_the_one_named_or_the_parent() {
        let p = Path::new;
        assert_eq!(
            state_dir(p("/w/.git"), b"rebase-merge"),
            Some("/w/.git/rebase-merge".into())
        );
        assert_eq!(
            state_dir(p("/w/.git/rebase-merge"), b"git-rebase-todo.lock"),
            Some("/w/.git/rebase-merge".into())
        );
        assert_eq!(state_dir(p("/w/.git"), b"config"), None);
        assert_eq!(
            state_dir(p("/w/rebase-merge/sub"), b"git-rebase-todo"),
            None
        );
        assert_eq!(state_dir(p("/w/.git"), b"rebase-merge.x"), None);
    }

    #[test]
    fn a_rename_carries_what_lies_inside_it() {
        let p = Path::new;
        let dir = p("/w/a/.git/rebase-merge");
        assert_eq!(
            moved(dir, p("/w/a"), p("/w/node_modules/b")),
            Some("/w/node_modules/b/.git/rebase-merge".into())
        );
        assert_eq!(moved(dir, dir, p("/w/x")), Some("/w/x".into()));
        assert_eq!(moved(dir, p("/w/ab"), p("/w/c")), None);
        assert_eq!(moved(dir, p("/w/a/.git/rebase-merge/t"), p("/w/c")), None);
    }
}
