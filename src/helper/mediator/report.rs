//! The guard's reports to sbx-shell (`session::journal`), one line each on an inherited
//! pipe (`HelperSpec::refusals_fd`): its refusals, written without waiting — a full pipe
//! loses the report, never delays the program's call; and the directories of git's state
//! the session touched (`protect::gitstate`), which sbx-shell looks at when the session
//! has ended: written whole, waiting while the pipe is full, never lost.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::policy::report::{report_line, report_line_about, state_line, Cause};

static REPORTS: OnceLock<OwnedFd> = OnceLock::new();

/// Where this guard's reports go, from now on (once).
pub(super) fn to(fd: OwnedFd) {
    let _ = REPORTS.set(fd);
}

/// Report a refusal of `path` (absolute; a relative one is not reported).
pub(super) fn refused(cause: Cause, path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    write(&report_line(cause, path.as_os_str().as_bytes()));
}

/// `refused`, with what was refused there (a git config's keys).
pub(super) fn refused_about(cause: Cause, path: &Path, about: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    write(&report_line_about(
        cause,
        path.as_os_str().as_bytes(),
        about,
    ));
}

fn write(line: &[u8]) {
    let Some(fd) = REPORTS.get() else { return };
    // A write of at most PIPE_BUF bytes to a pipe is whole or not at all. The pipe is
    // non-blocking: EAGAIN drops the report.
    let _ = nix::unistd::write(fd, line);
}

/// The state directories reported so far (`None` once `STATES_MAX` were: every one in
/// the writable trees was then reported, as `/`).
static STATES: Mutex<Option<Vec<PathBuf>>> = Mutex::new(Some(Vec::new()));

/// More distinct state directories than a session of git work touches.
const STATES_MAX: usize = 256;

/// Report the state directory `dir`, which the call being answered touches, unless it was.
pub(super) fn state(dir: PathBuf) {
    let Ok(mut states) = STATES.lock() else {
        return;
    };
    add_state(&mut states, dir);
}

/// `from` was renamed to `to`: report where each state directory it carried is now.
pub(super) fn renamed(moves: &[(PathBuf, PathBuf)]) {
    let Ok(mut states) = STATES.lock() else {
        return;
    };
    let Some(known) = states.as_ref() else { return };
    let now: Vec<PathBuf> = known
        .iter()
        .flat_map(|dir| {
            moves
                .iter()
                .filter_map(|(from, to)| crate::protect::gitstate::moved(dir, from, to))
        })
        .collect();
    for dir in now {
        add_state(&mut states, dir);
    }
}

fn add_state(states: &mut Option<Vec<PathBuf>>, dir: PathBuf) {
    use std::os::unix::ffi::OsStrExt;
    let Some(known) = states.as_mut() else { return };
    if known.contains(&dir) {
        return;
    }
    if known.len() >= STATES_MAX {
        *states = None;
        send_whole(&state_line(b"/"));
        return;
    }
    send_whole(&state_line(dir.as_os_str().as_bytes()));
    known.push(dir);
}

/// Write `line` (at most PIPE_BUF bytes) to the reports pipe whole, waiting while it is
/// full: sbx-shell reads it until the guard is gone. Nothing is sent when there is no
/// pipe, or no reader (EPIPE).
fn send_whole(line: &[u8]) {
    let Some(fd) = REPORTS.get() else { return };
    loop {
        // A pipe write of at most PIPE_BUF bytes is whole or not at all.
        let Err(e) = nix::unistd::write(fd, line) else {
            return;
        };
        match Some(e as i32) {
            Some(libc::EAGAIN) => {
                let mut fds = [nix::poll::PollFd::new(
                    fd.as_fd(),
                    nix::poll::PollFlags::POLLOUT,
                )];
                let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE);
            }
            Some(libc::EINTR) => {}
            _ => return,
        }
    }
}
/// Said once per process on the session's terminal when the guard may not read a program's
/// memory, so cannot tell what its calls name and refuses them: never a session in which
/// every name fails without a word. (A machine where the guard can read none is refused
/// before the program runs: `handshake`.)
pub(super) fn unreadable(call: &super::notify::Call, e: &std::io::Error) {
    use std::sync::Mutex;
    static TOLD: Mutex<Vec<String>> = Mutex::new(Vec::new());
    if !matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) {
        return;
    }
    let command = std::fs::read_to_string(format!("/proc/{}/comm", call.pid)).unwrap_or_default();
    let command = command.trim().to_string();
    let mut told = TOLD.lock().unwrap_or_else(|p| p.into_inner());
    if told.contains(&command) || told.len() > 64 {
        return;
    }
    told.push(command.clone());
    eprintln!("{}", unreadable_line(&command, call.pid, e));
}

/// What `unreadable` says, with the fix.
fn unreadable_line(command: &str, pid: u32, e: &std::io::Error) -> String {
    crate::sys::say::hinted(
        format_args!(
            "sbx-shell: the guard cannot read what {command}'s calls name (/proc/{pid}/mem: {e}), \
             so it refuses every name {command} makes"
        ),
        "a program whose file may be run but not read (mode 711) cannot be read by its parent \
         either: make it readable (chmod a+r on it), or run it outside sbx-shell",
    )
}
