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

use crate::sys::exit::ChildEnd;

#[cfg(target_os = "linux")]
#[path = "process/linux.rs"]
mod os;
#[cfg(target_os = "macos")]
#[path = "process/macos.rs"]
mod os;

pub use os::{install_subreaper, list_processes};
pub use tree::{only_child_chain, select_leftovers};

mod tree;
use os::{no_descendants_left, processes_below};

/// How long leftovers get after SIGHUP before SIGKILL.
const HANGUP_GRACE: Duration = Duration::from_millis(100);
/// Give up killing after this long (a fork bomb outrunning us must not hang the exit).
const KILL_DEADLINE: Duration = Duration::from_secs(2);

/// A cgroup to start a child in: its directory and its `cgroup.procs`, open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupFds {
    pub dir: std::os::fd::RawFd,
    pub procs: std::os::fd::RawFd,
}

/// Spawn `argv` with exactly the environment `env`, on `tty` (0, 1 and 2) when given, else
/// on inherited stdio; inside `cgroup`, if given, from its first instruction (nothing it
/// starts is ever outside).
pub fn spawn_child(
    argv: &[OsString],
    env: &[(OsString, OsString)],
    tty: Option<&OwnedFd>,
    own_group: bool,
    cgroup: Option<CgroupFds>,
) -> io::Result<Pid> {
    #[cfg(target_os = "linux")]
    if let Some(cgroup) = cgroup {
        use std::os::fd::AsRawFd;
        let tty = tty.map(AsRawFd::as_raw_fd);
        if let Some(pid) = os::spawn_into_cgroup(argv, env, tty, own_group, cgroup.dir)? {
            return Ok(pid);
        }
    }
    let cgroup_procs = cgroup.map(|c| c.procs);
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
    if let Some(fd) = cgroup_procs {
        // SAFETY: between fork and exec only write(2), async-signal-safe, on an fd the
        // parent keeps open until the spawn returns.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) == 1 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            });
        }
    }
    let child = command.spawn()?;
    let pid = i32::try_from(child.id()).map_err(|_| io::ErrorKind::InvalidData)?;
    // The supervisor reaps with waitpid itself (it must see stops and the signal number);
    // dropping std's handle neither waits nor kills.
    drop(child);
    Ok(Pid::from_raw(pid))
}

/// A pipe whose write end only this process holds (close-on-exec) and whose read end every
/// child inherits: it reads as end-of-file once this process is gone — by SIGKILL too, and
/// also when that happened before the child looked — which no death signal can promise.
/// The helper's guard checks and watches it.
#[derive(Debug)]
pub struct Lifeline {
    read: OwnedFd,
    _write: OwnedFd,
}

impl Lifeline {
    pub fn new() -> io::Result<Lifeline> {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag};
        use std::os::fd::AsFd;
        let (read, write) = nix::unistd::pipe()?;
        fcntl(write.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        Ok(Lifeline {
            read,
            _write: write,
        })
    }

    /// The read end, as children inherit it.
    pub fn child_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.read)
    }
}

/// Start a thread with every signal blocked: signals are the main thread's business (the
/// proxy's threads, the mediator's).
pub fn spawn_quiet(name: &str, work: impl FnOnce() + Send + 'static) -> io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let all = nix::sys::signal::SigSet::all();
            let _ = nix::sys::signal::pthread_sigmask(
                nix::sys::signal::SigmaskHow::SIG_BLOCK,
                Some(&all),
                None,
            );
            work();
        })?;
    Ok(())
}

/// A unix socket pair: ours close-on-exec, theirs for the helper to inherit (the proxy's
/// listening socket and the mediator's listener come back through it).
pub fn inheritable_socketpair() -> nix::Result<(OwnedFd, OwnedFd)> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    let (ours, theirs) = socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::empty(),
    )?;
    fcntl(&ours, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    Ok((ours, theirs))
}

/// Bytes a child reads from an inherited pipe instead of its argv, which every local user
/// can read (`ps`): the helper's spec, bwrap's options. Written now as far as the pipe
/// holds them, the rest (a plan larger than the pipe) by a thread; then the write end
/// (close-on-exec, so no child holds it) is closed and the reader sees end-of-file.
#[derive(Debug)]
pub struct Handover {
    read: OwnedFd,
}

impl Handover {
    pub fn new(bytes: Vec<u8>) -> io::Result<Handover> {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
        use std::os::fd::AsFd;
        let (read, write) = nix::unistd::pipe()?;
        fcntl(write.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(write.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        let mut written = 0;
        while written < bytes.len() {
            match nix::unistd::write(write.as_fd(), &bytes[written..]) {
                Ok(n) => written += n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(e) => return Err(e.into()),
            }
        }
        if written < bytes.len() {
            fcntl(write.as_fd(), FcntlArg::F_SETFL(OFlag::empty()))?;
            thread::Builder::new()
                .name("handover".into())
                .spawn(move || {
                    // A reader that ends early leaves EPIPE (SIGPIPE is ignored): nothing to do.
                    let _ =
                        io::Write::write_all(&mut std::fs::File::from(write), &bytes[written..]);
                })?;
        }
        Ok(Handover { read })
    }

    /// The read end, as children inherit it.
    pub fn child_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.read)
    }
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
        let found = select_leftovers(&processes_below(me), me, session);
        if !found.is_empty() {
            return found;
        }
        // A child is there (waitid says so) that the tasks' `children` lists did not show:
        // they are no snapshot while processes are re-parented to us (proc(5)). Look at
        // every process rather than end the sweep with it still alive.
        select_leftovers(&list_processes(), me, session)
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

#[cfg(test)]
mod tests {
    use super::tree::{parse_proc_stat, ProcInfo};
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
    fn a_handover_larger_than_a_pipe_arrives_whole_then_ends() {
        use std::io::Read;
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let handover = Handover::new(bytes.clone()).unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(handover.read.try_clone().unwrap());
        drop(handover);
        let mut got = Vec::new();
        // SAFETY: `fd` was just duplicated and nothing else owns it.
        let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        file.read_to_end(&mut got).unwrap();
        assert_eq!(got, bytes);
    }

    #[test]
    fn the_helper_reads_its_spec_from_the_handover() {
        let spec = crate::helper::spec::HelperSpec {
            new_session: false,
            limits: crate::helper::spec::ProcessLimits::default(),
            drop_privileges: true,
            landlock: None,
            seccomp: None,
            guard: true,
            stop_notify_fd: None,
            lifeline_fd: Some(7),
            mounts: Vec::new(),
            mounted: Vec::new(),
            shown_as: Some(crate::policy::ContainerUser {
                user: crate::policy::container::IdOrName::Name("node".into()),
                group: Some(crate::policy::container::IdOrName::Id(27)),
            }),
            proxy_listen: None,
            mediated: None,
            names: None,
            refusals_fd: Some(9),
            root_as: Some(crate::helper::spec::RootAsSpec {
                userns_fd: 11,
                id: 2_147_000_000,
                idmapped: vec!["/w".into(), "/tmp".into()],
                scaffolds: vec![crate::sandbox::rootas::Scaffold {
                    dir: "/root".into(),
                    keep: vec!["/root/.cargo".into()],
                }],
            }),
            root_reads: Some(crate::helper::mediator::RootReads {
                id: 2_147_000_000,
                grants: vec!["/w".into(), "/dev".into()],
            }),
        };
        let handover = Handover::new(crate::helper::spec::spec_bytes(&spec).unwrap()).unwrap();
        // A number far above what the other tests, running beside this one, open (a new
        // descriptor takes the lowest free number), so that none takes it once closed.
        let raw = std::os::fd::AsRawFd::as_raw_fd(&handover.read);
        // SAFETY: F_DUPFD_CLOEXEC makes a new descriptor of ours at 900 or above.
        let fd = unsafe { libc::fcntl(raw, libc::F_DUPFD_CLOEXEC, 900) };
        assert!(fd >= 900);
        assert_eq!(crate::helper::spec::read_spec(fd).unwrap(), spec);
        // read_spec closed it.
        // SAFETY: F_GETFD only reads the fd's flags.
        assert!(unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0);
        assert!(crate::helper::spec::read_spec(fd).is_err());
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
