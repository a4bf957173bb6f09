//! After the session, once none of its processes remains: git's operation state it wrote,
//! made or moved (`protect::gitstate`) is read, the rebase todos' `exec` lines made
//! comments and a merge strategy that is not git's own removed, so that the host's `git
//! rebase --continue` (or `cherry-pick --continue`) runs nothing the sandbox wrote. Each is
//! named on one line and in the session log.

use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::context::Run;
use crate::policy::Policy;
use crate::protect::gitstate::{self, OPTIONS, SEQUENCER_DIR, STATE_DIR, STRATEGY, TODO};
use crate::protect::names::under;
use crate::protect::planted::Planted;
use crate::protect::repos;
use crate::sandbox::Backend;

/// Step 9's first part, after the guard's reports were read (`Journal::drain`): the todos
/// disarmed, said on one line; nothing without a sandbox.
pub(super) fn after(run: &Run) -> Vec<Planted> {
    if matches!(run.backend, Backend::None) {
        return Vec::new();
    }
    // Only the guard reports the state it touched: without one, or with its reports not
    // read to their end, every repository's is looked at.
    let (reported, everywhere) = match run.journal.states() {
        Some(dirs) => (dirs, false),
        None => (Vec::new(), true),
    };
    let disarmed = todos(&run.plan.policy, reported, everywhere, run.started);
    if let Some(line) = line(&disarmed) {
        crate::sys::say::warning(&line);
    }
    disarmed
}

/// What a todo may weigh: git reads it whole; a longer one is replaced.
const TODO_LIMIT: u64 = 64 << 20;

/// The todos in `reported` (the guard's state directories; `/` or `everywhere`: every git
/// directory's in the writable trees) written since `started`, disarmed: what was done to
/// each, in path order.
fn todos(
    policy: &Policy,
    reported: Vec<PathBuf>,
    everywhere: bool,
    started: SystemTime,
) -> Vec<Planted> {
    let roots = policy.filesystem.writable_roots();
    let mut dirs = reported;
    if everywhere || dirs.iter().any(|d| d == Path::new("/")) {
        let found = repos::scan_writable(policy);
        dirs.extend(found.git_dirs.iter().map(|g| g.dir.join(STATE_DIR)));
        dirs.extend(found.git_dirs.iter().map(|g| g.dir.join(SEQUENCER_DIR)));
    }
    let mut real: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| *d != Path::new("/"))
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .filter(|d| roots.iter().any(|r| under(d, r)))
        .collect();
    real.sort();
    real.dedup();
    // The file system's clock runs behind the wall clock by up to a tick.
    let since = started - Duration::from_secs(1);
    let mut done: Vec<Planted> = real
        .iter()
        .filter_map(|dir| disarm_in(dir, since, &roots))
        .collect();
    done.extend(real.iter().filter_map(|dir| strategy_in(dir, since)));
    done
}

/// Remove the merge strategy in the state directory `dir` (`rebase-merge/strategy`,
/// `sequencer/opts`) when it changed since `since` and names one that is not git's own
/// (`gitstate::judge`): git then merges with its default, and runs no program of the
/// sandbox's. `None`: nothing to do.
fn strategy_in(dir: &Path, since: SystemTime) -> Option<Planted> {
    let name = match dir.file_name()?.to_str()? {
        STATE_DIR => STRATEGY,
        SEQUENCER_DIR => OPTIONS,
        _ => return None,
    };
    let file = dir.join(name);
    let kind = gitstate::state_file(dir, name.as_bytes())?;
    let seen = file.symlink_metadata().ok()?;
    let changed = SystemTime::UNIX_EPOCH
        + Duration::new(u64::try_from(seen.ctime()).ok()?, seen.ctime_nsec() as u32);
    if changed < since {
        return None;
    }
    let refused = match read(&file) {
        Some(text) => gitstate::judge(kind, &text, "").err()?,
        None => "a file that could not be read whole".to_string(),
    };
    let what = match std::fs::remove_file(&file) {
        Ok(()) => format!("{refused}, which git would run as a program: removed"),
        Err(e) => format!("{refused}, which git would run as a program, could not be removed: {e}"),
    };
    Some(Planted { path: file, what })
}

/// Disarm the todo in the state directory `dir` (a real path), when it changed since
/// `since` and holds what git would run: the todo replaced by a new file of the same
/// owner and mode, holding the same with each `exec` line a comment (a symlink, or a file
/// that cannot be read whole, by a comment alone). `None`: nothing to do.
fn disarm_in(dir: &Path, since: SystemTime, roots: &[&Path]) -> Option<Planted> {
    let todo = dir.join(TODO);
    let seen = todo.symlink_metadata().ok()?;
    let changed = SystemTime::UNIX_EPOCH
        + Duration::new(u64::try_from(seen.ctime()).ok()?, seen.ctime_nsec() as u32);
    if changed < since {
        return None;
    }
    let (text, what) = if seen.file_type().is_symlink() {
        let target = std::fs::canonicalize(&todo).ok();
        let inside = target
            .as_ref()
            .is_some_and(|t| roots.iter().any(|r| under(t, r)));
        match target.filter(|_| inside).and_then(|t| read(&t)) {
            Some(text) => (
                gitstate::disarm(&text)?.0,
                "a symlink, replaced by its text".to_string(),
            ),
            None => (
                comment("was a symlink"),
                "a symlink leading out of the writable places, replaced by a comment".to_string(),
            ),
        }
    } else if seen.file_type().is_file() {
        match read(&todo) {
            Some(text) => {
                let (text, lines) = gitstate::disarm(&text)?;
                (text, named(&lines))
            }
            None => (
                comment("could not be read whole"),
                "too large to read whole, replaced by a comment".to_string(),
            ),
        }
    } else {
        return None;
    };
    let mode = if seen.file_type().is_file() {
        seen.mode() & 0o7777
    } else {
        0o644
    };
    match place(dir, &text, mode, seen.uid(), seen.gid()) {
        Ok(()) => Some(Planted {
            path: todo,
            what: format!("rebase todo: {what}"),
        }),
        Err(e) => Some(Planted {
            path: todo,
            what: format!("rebase todo that runs commands, which could not be disarmed: {e}"),
        }),
    }
}

fn read(path: &Path) -> Option<Vec<u8>> {
    crate::sys::files::read_regular(path, TODO_LIMIT).ok()
}

fn comment(why: &str) -> Vec<u8> {
    format!("# sbx-shell: this todo {why} when the session that made it ended\n").into_bytes()
}

/// "exec lines made comments: exec make test; …", three at most.
fn named(lines: &[String]) -> String {
    let shown: Vec<String> = lines
        .iter()
        .take(3)
        .map(|l| l.chars().take(80).collect())
        .collect();
    let more = match lines.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    format!("exec lines made comments: {}{more}", shown.join("; "))
}

/// Put `text` at `dir`/`TODO` as a new file (`mode`, owned by `uid`:`gid` when sbx-shell
/// runs as root), renamed over whatever is there.
fn place(dir: &Path, text: &[u8], mode: u32, uid: u32, gid: u32) -> std::io::Result<()> {
    use std::io::Write;
    let temp = dir.join(format!(".{TODO}.sbx-shell-{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)?;
    let done = file
        .write_all(text)
        .and_then(|()| match nix::unistd::geteuid().is_root() {
            // Another user's file only root can make (root's sessions write as root).
            true => nix::unistd::fchown(file.as_fd(), Some(uid.into()), Some(gid.into()))
                .map_err(Into::into),
            false => Ok(()),
        })
        .and_then(|()| file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode)))
        .and_then(|()| std::fs::rename(&temp, dir.join(TODO)));
    if done.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    done
}

/// The one line for the terminal, or `None` when no todo was disarmed.
fn line(disarmed: &[Planted]) -> Option<String> {
    if disarmed.is_empty() {
        return None;
    }
    let all: Vec<String> = disarmed.iter().map(ToString::to_string).collect();
    Some(super::messages::todos_disarmed(&all))
}
