//! The child's lifecycle from the supervisor's side: spawn, reap, and kill what is left.
//!
//! "Nothing the child started survives the session": on Linux the supervisor is a child
//! subreaper, so every orphan the child leaves behind (nohup'd, setsid'd, double-forked) is
//! re-parented to it and found by walking down from it through /proc's `children` lists; a
//! subreaper without children has nothing left below it at all. On macOS, which has no
//! subreaper, the walk covers every process and also takes every member of the child's
//! session. The tree walk itself (`select_leftovers`) is pure.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::exit::ChildEnd;

/// How long leftovers get after SIGHUP before SIGKILL.
const HANGUP_GRACE: Duration = Duration::from_millis(100);
/// Give up killing after this long (a fork bomb outrunning us must not hang the exit).
const KILL_DEADLINE: Duration = Duration::from_secs(2);

/// The process `depth` generations below `root`, if each generation has exactly one live
/// process (a launcher's chain).
pub fn only_child_chain(procs: &[ProcInfo], root: i32, depth: usize) -> Option<i32> {
    let mut pid = root;
    for _ in 0..depth {
        let mut children = procs.iter().filter(|p| p.ppid == pid && !p.zombie);
        let only = children.next()?;
        if children.next().is_some() {
            return None;
        }
        pid = only.pid;
    }
    Some(pid)
}

/// Spawn `argv` with exactly the environment `env`, on `tty` (0, 1 and 2) when given, else
/// on inherited stdio.
pub fn spawn_child(
    argv: &[OsString],
    env: &[(OsString, OsString)],
    tty: Option<&OwnedFd>,
    own_group: bool,
) -> io::Result<Pid> {
    let (program, args) = argv.split_first().ok_or(io::ErrorKind::InvalidInput)?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(tty) = tty {
        command
            .stdin(Stdio::from(tty.try_clone()?))
            .stdout(Stdio::from(tty.try_clone()?))
            .stderr(Stdio::from(tty.try_clone()?));
    }
    if own_group {
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
    }
    let child = command.spawn()?;
    let pid = i32::try_from(child.id()).map_err(|_| io::ErrorKind::InvalidData)?;
    // The supervisor reaps with waitpid itself (it must see stops and the signal number);
    // dropping std's handle neither waits nor kills.
    drop(child);
    Ok(Pid::from_raw(pid))
}

/// What happened to one of our children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEvent {
    Ended(Pid, ChildEnd),
    Stopped(Pid),
}

/// Reap every child that changed state, without blocking.
pub fn reap_children() -> Vec<ChildEvent> {
    let flags = WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED;
    let mut events = Vec::new();
    loop {
        match waitpid(None::<Pid>, Some(flags)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                events.push(ChildEvent::Ended(pid, ChildEnd::Exited(code)))
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) => {
                events.push(ChildEvent::Ended(pid, ChildEnd::Signaled(signal as i32)));
            }
            Ok(WaitStatus::Stopped(pid, _)) => events.push(ChildEvent::Stopped(pid)),
            Ok(WaitStatus::StillAlive) | Err(_) => return events,
            Ok(_) => {}
        }
    }
}

/// True when we are a child subreaper (Linux): every orphan below us is then re-parented to
/// us, so the processes below us are exactly our children and theirs.
#[cfg(target_os = "linux")]
fn is_subreaper() -> bool {
    let mut reaper: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer, which is valid.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut reaper as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    rc == 0 && reaper != 0
}

/// True when nothing can be left below us: a subreaper without any child, not even an
/// unreaped one. Saves every walk on the common way out.
#[cfg(target_os = "linux")]
fn no_descendants_left() -> bool {
    if !is_subreaper() {
        return false;
    }
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    let flags = libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: `info` is a writable siginfo_t; WNOWAIT leaves any child's state in place.
    let rc = unsafe { libc::waitid(libc::P_ALL, 0, info.as_mut_ptr(), flags) };
    rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

#[cfg(not(target_os = "linux"))]
fn no_descendants_left() -> bool {
    false
}

/// The processes that `select_leftovers` needs to see: as a subreaper, only those below
/// `me`, found through each task's `children` list (a handful of reads instead of one per
/// process on the machine); else every process.
#[cfg(target_os = "linux")]
fn processes_below(me: i32) -> Vec<ProcInfo> {
    // Without CONFIG_PROC_CHILDREN there are no lists: walk everything rather than miss any.
    let lists = std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists();
    if !is_subreaper() || !lists {
        return list_processes();
    }
    let mut found: Vec<ProcInfo> = Vec::new();
    let mut frontier = vec![me];
    while let Some(pid) = frontier.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children
                .split_ascii_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if found.iter().any(|p| p.pid == child) {
                    continue;
                }
                let stat = std::fs::read_to_string(format!("/proc/{child}/stat"));
                if let Some(info) = stat.ok().and_then(|stat| parse_proc_stat(child, &stat)) {
                    found.push(info);
                    frontier.push(child);
                }
            }
        }
    }
    found
}

#[cfg(not(target_os = "linux"))]
fn processes_below(_me: i32) -> Vec<ProcInfo> {
    list_processes()
}

/// Become the reaper of every orphan below us (Linux); elsewhere a no-op.
pub fn install_subreaper() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// One process as the tree walk needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub ppid: i32,
    pub sid: i32,
    pub zombie: bool,
}

/// The live processes to kill: descendants of `root`, and members of `session` if given.
/// `root` itself is never selected; zombies are skipped (they are only waiting to be reaped).
pub fn select_leftovers(procs: &[ProcInfo], root: i32, session: Option<i32>) -> Vec<i32> {
    let mut selected: Vec<i32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent && p.pid != root) {
            if !selected.contains(&p.pid) {
                selected.push(p.pid);
                frontier.push(p.pid);
            }
        }
    }
    if let Some(sid) = session {
        for p in procs.iter().filter(|p| p.sid == sid && p.pid != root) {
            if !selected.contains(&p.pid) {
                selected.push(p.pid);
            }
        }
    }
    selected.retain(|pid| procs.iter().any(|p| p.pid == *pid && !p.zombie));
    selected
}

/// Hang up, then kill, every process below us (and in `child_session`). Bounded in time.
/// Returns what was reaped meanwhile, so the caller learns how its own child ended.
pub fn kill_leftovers(child_session: Option<Pid>) -> Vec<ChildEvent> {
    let me = nix::unistd::getpid().as_raw();
    let session = child_session.map(Pid::as_raw);
    let mut reaped = Vec::new();
    let mut leftovers = || {
        reaped.extend(reap_children());
        if no_descendants_left() {
            return Vec::new();
        }
        select_leftovers(&processes_below(me), me, session)
    };
    let first = leftovers();
    if first.is_empty() {
        return reaped;
    }
    for pid in &first {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGHUP);
        let _ = kill(Pid::from_raw(*pid), Signal::SIGCONT);
    }
    // Most leftovers are already on their way out (a launcher's init, still exiting when its
    // parent is reaped): look again soon, then less and less often.
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    while start.elapsed() < HANGUP_GRACE {
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
        if leftovers().is_empty() {
            return reaped;
        }
    }
    while start.elapsed() < KILL_DEADLINE {
        let rest = leftovers();
        if rest.is_empty() {
            break;
        }
        for pid in rest {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        thread::sleep(Duration::from_millis(2));
    }
    reaped
}

/// Every process on the machine, as far as we may see it.
#[cfg(target_os = "linux")]
pub fn list_processes() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            parse_proc_stat(pid, &stat)
        })
        .collect()
}

/// Parse `/proc/PID/stat`: "pid (comm) state ppid pgrp session ..."; comm may hold ')'.
pub fn parse_proc_stat(pid: i32, stat: &str) -> Option<ProcInfo> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let sid = fields.next()?.parse().ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        sid,
        zombie: state == "Z" || state == "X",
    })
}

/// Every process on the machine, through libproc.
#[cfg(target_os = "macos")]
pub fn list_processes() -> Vec<ProcInfo> {
    let mut pids = vec![0 as libc::pid_t; 8192];
    let bytes = i32::try_from(pids.len() * std::mem::size_of::<libc::pid_t>()).unwrap_or(i32::MAX);
    // SAFETY: the buffer is valid for `bytes` bytes and libproc writes at most that many.
    let count = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
    pids.truncate(usize::try_from(count).unwrap_or(0));
    pids.into_iter()
        .filter(|pid| *pid > 0)
        .filter_map(macos_proc_info)
        .collect()
}

#[cfg(target_os = "macos")]
fn macos_proc_info(pid: libc::pid_t) -> Option<ProcInfo> {
    // SAFETY: proc_bsdinfo is plain old data; all-zero is a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = i32::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).ok()?;
    // SAFETY: `info` is valid for `size` bytes, which is what PROC_PIDTBSDINFO writes.
    let got = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast(),
            size,
        )
    };
    if got != size {
        return None;
    }
    let sid = nix::unistd::getsid(Some(Pid::from_raw(pid))).ok()?.as_raw();
    let ppid = i32::try_from(info.pbi_ppid).ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        sid,
        zombie: info.pbi_status == libc::SZOMB,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: i32, ppid: i32, sid: i32) -> ProcInfo {
        ProcInfo {
            pid,
            ppid,
            sid,
            zombie: false,
        }
    }

    #[test]
    fn leftovers_are_the_live_descendants_and_the_session() {
        let procs = [
            p(1, 0, 1),
            p(100, 1, 100),   // us
            p(200, 100, 200), // an orphan re-parented to us (setsid'd)
            p(201, 200, 200), // its child
            p(300, 1, 150),   // in the child's session, re-parented to init (macOS case)
            p(400, 1, 400),   // unrelated
            ProcInfo {
                pid: 202,
                ppid: 200,
                sid: 200,
                zombie: true,
            },
        ];
        let mut got = select_leftovers(&procs, 100, Some(150));
        got.sort();
        assert_eq!(got, vec![200, 201, 300]);
        let mut got = select_leftovers(&procs, 100, None);
        got.sort();
        assert_eq!(got, vec![200, 201]);
    }

    #[test]
    fn proc_stat_with_odd_command_names_parses() {
        let stat = "4242 (a) b (c)) S 17 4242 99 34816 4242 4194560 0 0";
        assert_eq!(parse_proc_stat(4242, stat), Some(p(4242, 17, 99)));
        let zombie = "7 (x) Z 1 7 7 0";
        assert!(parse_proc_stat(7, zombie).unwrap().zombie);
        assert_eq!(parse_proc_stat(1, "garbage"), None);
    }
}
