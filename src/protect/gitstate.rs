//! git's state of an operation in progress that the user continues: what in it makes git
//! run a program, and how a session keeps it from running one on the host. Pure.
//!
//! Three files hold such a thing (`StateFile`): a rebase's todo
//! (`rebase-merge/git-rebase-todo`), whose `exec` lines `git rebase --continue` runs (after
//! `git status` invites the user to); a rebase's merge strategy (`rebase-merge/strategy`)
//! and the sequencer's (`options.strategy` in `sequencer/opts`, cherry-pick and revert),
//! which git runs as the program `git-merge-NAME` — a name with a `/` is a path from the
//! work tree's top. The sequencer's own todo accepts no other command than its own, and
//! `rebase-apply/` (am) none.
//!
//! The model, while a session runs (the guard): those names only ever hold what the guard
//! judged and put there as a new file. An `exec` line is bound to the session (`bind`):
//! it runs where `SESSION_VARIABLE` holds the session's token — inside, so `git rebase -x
//! 'make test'` works — and fails anywhere else, so the host's `git rebase --continue` meanwhile runs
//! nothing. A strategy other than git's own (`STRATEGIES`) is refused. When the session
//! has ended, every state directory it touched is looked at again (`disarm`): its `exec`
//! lines become comments, a foreign strategy is removed — which is all there is without
//! the guard.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The directory of a rebase's state, in a git directory (a linked worktree's too).
pub const STATE_DIR: &str = "rebase-merge";

/// The todo in `STATE_DIR`.
pub const TODO: &str = "git-rebase-todo";

/// The rebase's merge strategy in `STATE_DIR`.
pub const STRATEGY: &str = "strategy";

/// The directory of the sequencer's state (cherry-pick, revert), and its options there.
pub const SEQUENCER_DIR: &str = "sequencer";
pub const OPTIONS: &str = "opts";

/// The variable that holds the session's token in its processes' environment.
pub const SESSION_VARIABLE: &str = "SBX_SESSION";

/// git's own merge strategies (`builtin/merge.c`): the programs it ships.
pub const STRATEGIES: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

/// A file of git's operation state that can make git run a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFile {
    /// `rebase-merge/git-rebase-todo`: its `exec` lines.
    Todo,
    /// `rebase-merge/strategy`: one strategy's name.
    Strategy,
    /// `sequencer/opts`: a config whose `options.strategy` names one.
    Options,
}

fn last(path: &Path) -> &[u8] {
    path.file_name().map_or(&[], |n| n.as_encoded_bytes())
}

/// What the entry `name` of the directory `parent` is among `StateFile`s.
pub fn state_file(parent: &Path, name: &[u8]) -> Option<StateFile> {
    match (last(parent), name) {
        (d, n) if d == STATE_DIR.as_bytes() && n == TODO.as_bytes() => Some(StateFile::Todo),
        (d, n) if d == STATE_DIR.as_bytes() && n == STRATEGY.as_bytes() => {
            Some(StateFile::Strategy)
        }
        (d, n) if d == SEQUENCER_DIR.as_bytes() && n == OPTIONS.as_bytes() => {
            Some(StateFile::Options)
        }
        _ => None,
    }
}

/// Whether `name` is that of a directory of state files (`STATE_DIR`, `SEQUENCER_DIR`):
/// one renamed into place would bring files nobody judged.
pub fn is_state_dir(name: &[u8]) -> bool {
    name == STATE_DIR.as_bytes() || name == SEQUENCER_DIR.as_bytes()
}

/// The state directory that making, writing or linking the entry `name` of the directory
/// `parent` touches, or `None`: `parent/name` when that is named so (`is_state_dir`),
/// `parent` when it is. (Anything deeper reaches a state file only when it is moved there:
/// that move names one of the two.)
pub fn state_dir(parent: &Path, name: &[u8]) -> Option<PathBuf> {
    if is_state_dir(name) {
        return Some(parent.join(OsStr::from_bytes(name)));
    }
    is_state_dir(last(parent)).then(|| parent.to_path_buf())
}

/// What may stand at the state file `kind`, for a session whose token is `token`: `text`
/// with each `exec` line bound to the session (`bind`), or what is refused in it (a
/// strategy that is not git's own, a sequencer's options git cannot read).
pub fn judge(kind: StateFile, text: &[u8], token: &str) -> Result<Vec<u8>, String> {
    match kind {
        StateFile::Todo => Ok(bind(text, token)),
        StateFile::Strategy => match foreign_strategy(text) {
            None => Ok(text.to_vec()),
            Some(name) => Err(format!("merge strategy {name}")),
        },
        StateFile::Options => match options_strategy(text) {
            Ok(None) => Ok(text.to_vec()),
            Ok(Some(name)) => Err(format!("merge strategy {name}")),
            Err(e) => Err(format!("sequencer options: {e}")),
        },
    }
}

/// The strategy a `strategy` file names when it is not one of git's own, quoted for a
/// message. As git reads it (`read_oneliner`): the whole file, one line end at its end
/// dropped — so a second line is part of the name.
pub fn foreign_strategy(text: &[u8]) -> Option<String> {
    let name = text.strip_suffix(b"\n").unwrap_or(text);
    let name = match text.ends_with(b"\n") {
        true => name.strip_suffix(b"\r").unwrap_or(name),
        false => name,
    };
    let own = name.is_empty() || STRATEGIES.iter().any(|s| s.as_bytes() == name);
    (!own).then(|| format!("{:?}", String::from_utf8_lossy(name)))
}

/// The foreign strategy (`foreign_strategy`) the sequencer's options name, if any.
pub fn options_strategy(
    text: &[u8],
) -> Result<Option<String>, crate::policy::gitconfig::ParseError> {
    let entries = crate::policy::gitconfig::parse(text)?;
    Ok(entries
        .iter()
        .filter(|e| e.key == b"options.strategy")
        .find_map(|e| foreign_strategy(e.value.as_deref().unwrap_or(b"true"))))
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
/// a comment (the session's binding, `bind`, taken off first), and those lines (without
/// their line ends), or `None` when it holds none.
pub fn disarm(text: &[u8]) -> Option<(Vec<u8>, Vec<String>)> {
    let mut out = Vec::with_capacity(text.len() + 16);
    let mut lines = Vec::new();
    for line in text.split_inclusive(|b| *b == b'\n') {
        let Some(exec) = ExecLine::of(line) else {
            out.extend_from_slice(line);
            continue;
        };
        let line = exec.unbound(line);
        out.extend_from_slice(DISARMED);
        out.extend_from_slice(&line);
        let bare = line.strip_suffix(b"\n").unwrap_or(&line);
        let bare = bare.strip_suffix(b"\r").unwrap_or(bare);
        lines.push(String::from_utf8_lossy(bare).trim().to_string());
    }
    (!lines.is_empty()).then_some((out, lines))
}

/// `text` with every `exec` line bound to the session whose token is `token`: its command
/// runs only where `SESSION_VARIABLE` holds that token (or one it was bound to before: a
/// session nested in another is bound to both), and fails (status 97) elsewhere, before
/// any of it runs. Binding twice changes nothing. A token that is not a plain alphanumeric
/// one is not bound to.
pub fn bind(text: &[u8], token: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for line in text.split_inclusive(|b| *b == b'\n') {
        match ExecLine::of(line) {
            Some(exec) if !exec.command.is_empty() => {
                let mut tokens = exec.tokens.clone();
                if !tokens.contains(&token.as_bytes()) {
                    tokens.push(token.as_bytes());
                }
                out.extend_from_slice(b"exec ");
                out.extend_from_slice(&binding(&tokens));
                out.extend_from_slice(exec.command);
                out.extend_from_slice(exec.end);
            }
            _ => out.extend_from_slice(line),
        }
    }
    out
}

const BINDING_HEAD: &str = "case \"${SBX_SESSION-}\" in ";
const BINDING_TAIL: &str = ") ;; *) exit 97;; esac; ";

/// What is put before a bound command: a test of the session's token, whose failure ends
/// the shell git runs it in before the command is read. Tokens that are not plain
/// alphanumerics are left out; with none left the pattern is `-`, never a token (the guard
/// always has one: `helper::mediator::statefiles`).
fn binding(tokens: &[&[u8]]) -> Vec<u8> {
    let mut kept: Vec<&[u8]> = tokens.iter().copied().filter(|t| is_token(t)).collect();
    if kept.is_empty() {
        kept.push(b"-");
    }
    [
        BINDING_HEAD.as_bytes(),
        &kept.join(&b'|'),
        BINDING_TAIL.as_bytes(),
    ]
    .concat()
}

fn is_token(t: &[u8]) -> bool {
    !t.is_empty() && t.iter().all(u8::is_ascii_alphanumeric)
}

/// An `exec` line of a todo, taken apart: its command without the session binding, the
/// tokens it was bound to, and its line end.
struct ExecLine<'a> {
    command: &'a [u8],
    end: &'a [u8],
    tokens: Vec<&'a [u8]>,
}

impl<'a> ExecLine<'a> {
    fn of(line: &'a [u8]) -> Option<ExecLine<'a>> {
        let blank = |b: &u8| *b == b' ' || *b == b'\t';
        let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
        let word = &line[start..];
        let rest = word
            .strip_prefix(b"exec")
            .or_else(|| word.strip_prefix(b"x"))?;
        if !matches!(rest.first(), None | Some(b' ' | b'\t' | b'\r' | b'\n')) {
            return None;
        }
        let body_len = rest
            .iter()
            .position(|b| *b == b'\r' || *b == b'\n')
            .unwrap_or(rest.len());
        let (body, end) = rest.split_at(body_len);
        let mut command = &body[body.iter().position(|b| !blank(b)).unwrap_or(body.len())..];
        let mut tokens = Vec::new();
        while let Some((bound, unbound)) = strip_binding(command) {
            tokens.extend(bound);
            command = unbound;
        }
        Some(ExecLine {
            command,
            end,
            tokens,
        })
    }

    /// The line as it was, or, when it was bound, as `exec COMMAND`.
    fn unbound(&self, line: &[u8]) -> Vec<u8> {
        match self.tokens.is_empty() {
            true => line.to_vec(),
            false => [b"exec ".as_slice(), self.command, self.end].concat(),
        }
    }
}

/// The tokens of one binding at the start of `command`, and the rest.
fn strip_binding(command: &[u8]) -> Option<(Vec<&[u8]>, &[u8])> {
    let rest = command.strip_prefix(BINDING_HEAD.as_bytes())?;
    let len = rest
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'|' || **b == b'-')
        .count();
    let after = rest[len..].strip_prefix(BINDING_TAIL.as_bytes())?;
    let tokens = rest[..len]
        .split(|b| *b == b'|')
        .filter(|t| is_token(t))
        .collect();
    Some((tokens, after))
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
    fn exec_lines_are_bound_to_the_session_once_and_unbound_when_disarmed() {
        let text = b"pick 1a c1\nexec make test\n  x\t./evil\r\nexecute y\nexec\nbreak";
        let bound = bind(text, "ab12");
        let head = "exec case \"${SBX_SESSION-}\" in ab12) ;; *) exit 97;; esac; ";
        let want = format!("pick 1a c1\n{head}make test\n{head}./evil\r\nexecute y\nexec\nbreak");
        assert_eq!(String::from_utf8_lossy(&bound), want);
        assert_eq!(bind(&bound, "ab12"), bound, "bound twice");
        // A session inside another: bound to both.
        let nested = String::from_utf8(bind(&bind(text, "ff00"), "ab12")).unwrap();
        assert!(nested.contains("in ff00|ab12) ;;"), "{nested}");
        // No token (or one that is not a token) binds to nothing.
        let none = String::from_utf8(bind(text, "")).unwrap();
        assert!(none.contains("in -) ;;"), "{none}");
        let odd = String::from_utf8(bind(text, "a) ;; *")).unwrap();
        assert!(odd.contains("in -) ;;"), "{odd}");
        let (out, lines) = disarm(nested.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "pick 1a c1\n# exec make test\n# exec ./evil\r\nexecute y\n# exec\nbreak"
        );
        assert_eq!(lines, ["exec make test", "exec ./evil", "exec"]);
        assert_eq!(
            disarm(&bound).unwrap().0,
            disarm(nested.as_bytes()).unwrap().0
        );
    }

    #[test]
    fn a_bound_line_runs_only_where_the_session_token_is_set() {
        let line = bind(b"exec echo ran; echo twice || echo three\n", "ab12");
        let command = &line[b"exec ".len()..line.len() - 1];
        let run = |token: Option<&str>| {
            let mut sh = std::process::Command::new("sh");
            sh.arg("-c").arg(std::ffi::OsStr::from_bytes(command));
            sh.env_remove(SESSION_VARIABLE);
            if let Some(t) = token {
                sh.env(SESSION_VARIABLE, t);
            }
            let out = sh.output().unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        assert_eq!(run(Some("ab12")), (Some(0), "ran\ntwice\n".to_string()));
        assert_eq!(run(None), (Some(97), String::new()));
        assert_eq!(run(Some("")), (Some(97), String::new()));
        assert_eq!(run(Some("ab1")), (Some(97), String::new()));
        assert_eq!(run(Some("ab12|x")), (Some(97), String::new()));
        assert_eq!(run(Some("*")), (Some(97), String::new()));
        // Bound to no token: runs where none is set neither.
        let line = bind(b"exec echo ran\n", "");
        let command = &line[b"exec ".len()..line.len() - 1];
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(std::ffi::OsStr::from_bytes(command))
            .env_remove(SESSION_VARIABLE)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(97));
    }

    #[test]
    fn strategies_other_than_gits_own_are_refused() {
        for own in ["ort\n", "recursive\n", "octopus", "ours\r\n", ""] {
            assert_eq!(foreign_strategy(own.as_bytes()), None, "{own:?}");
            assert!(judge(StateFile::Strategy, own.as_bytes(), "t").is_ok());
        }
        for foreign in [
            "/../git-merge-evil\n",
            "evil\n",
            "ort \n",
            "ORT\n",
            "ort\n/../s.sh\n",
            "ort\n\n",
            "ort\r",
        ] {
            assert!(
                foreign_strategy(foreign.as_bytes()).is_some(),
                "{foreign:?}"
            );
            assert!(judge(StateFile::Strategy, foreign.as_bytes(), "t").is_err());
        }
        let opts = b"[options]\n\tstrategy = ort\n\tmainline = 1\n";
        assert_eq!(options_strategy(opts), Ok(None));
        let opts = b"[options]\n\tmainline = 1\n[OPTIONS]\n\tStrategy = \"x/../../run\"\n";
        assert_eq!(options_strategy(opts), Ok(Some("\"x/../../run\"".into())));
        let opts = b"[options]\n\tstrategy = \"ort\\n/../s.sh\"\n";
        assert!(options_strategy(opts).unwrap().is_some());
        assert!(judge(StateFile::Options, b"[options\n", "t").is_err());
    }

    #[test]
    fn the_state_files_by_directory_and_name() {
        let p = Path::new;
        assert_eq!(
            state_file(p("/w/.git/rebase-merge"), b"git-rebase-todo"),
            Some(StateFile::Todo)
        );
        assert_eq!(
            state_file(p("/w/.git/worktrees/a/rebase-merge"), b"strategy"),
            Some(StateFile::Strategy)
        );
        assert_eq!(
            state_file(p("/w/.git/sequencer"), b"opts"),
            Some(StateFile::Options)
        );
        assert_eq!(state_file(p("/w/.git/sequencer"), b"todo"), None);
        assert_eq!(state_file(p("/w/.git/rebase-merge"), b"done"), None);
        assert_eq!(state_file(p("/w/.git"), b"git-rebase-todo"), None);
        assert_eq!(
            state_dir(p("/w/.git"), b"sequencer"),
            Some("/w/.git/sequencer".into())
        );
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
