//! The process tree on Linux (`process::os`): the supervisor as a child subreaper, and the
//! processes below it through /proc.

use std::io;

use super::tree::{parse_proc_stat, ProcInfo};

/// Become the reaper of every orphan below us.
pub fn install_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// True when we are a child subreaper (Linux): every orphan below us is then re-parented to
/// us, so the processes below us are exactly our children and theirs.
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
pub fn no_descendants_left() -> bool {
    if !is_subreaper() {
        return false;
    }
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    let flags = libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: `info` is a writable siginfo_t; WNOWAIT leaves any child's state in place.
    let rc = unsafe { libc::waitid(libc::P_ALL, 0, info.as_mut_ptr(), flags) };
    rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

/// The processes that `select_leftovers` needs to see: as a subreaper, only those below
/// `me`, found through each task's `children` list (a handful of reads instead of one per
/// process on the machine); else every process.
pub fn processes_below(me: i32) -> Vec<ProcInfo> {
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

/// Every process on the machine, as far as we may see it.
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

/// `struct clone_args` of clone3(2), up to `cgroup` (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// Spawn `argv[0]` (an absolute path) with `argv` and exactly `env`, on `tty` (0, 1 and 2)
/// when given, in a process group of its own when `own_group`, born inside the cgroup
/// whose directory `cgroup_dir` is (clone3 with CLONE_INTO_CGROUP: no migration, which
/// would cost the kernel an RCU grace period — 6 to 20 ms measured here).
///
/// `Ok(None)` when this kernel has no clone3 or no CLONE_INTO_CGROUP (before 5.7): the
/// caller then spawns another way.
pub fn spawn_into_cgroup(
    argv: &[std::ffi::OsString],
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    tty: Option<std::os::fd::RawFd>,
    own_group: bool,
    cgroup_dir: std::os::fd::RawFd,
) -> io::Result<Option<nix::unistd::Pid>> {
    // Everything the child needs is made before the clone: it may not allocate.
    let exec = Exec::prepare(argv, env)?;
    let (err_read, err_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    let err_write_fd = std::os::fd::AsRawFd::as_raw_fd(&err_write);
    let clone_args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: cgroup_dir as u64,
        ..CloneArgs::default()
    };
    // No handler of ours may run in the child before it execs (it would write to our
    // signal pipes): every signal is blocked across the clone, as posix_spawn does.
    // SAFETY: a zeroed sigset_t is a valid value to fill in.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut previous: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sigsets are valid; pthread_sigmask touches only them.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut previous);
    }
    // SAFETY: clone3 with a valid, fully initialized clone_args of the size passed, and
    // without CLONE_VM: the child gets a copy of our memory, as with fork.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &clone_args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if pid == 0 {
        // SAFETY: this is the child of the clone above, and `exec` was made before it.
        unsafe { exec.run_in_child(tty, own_group, err_write_fd) }
    }
    let clone_error = io::Error::last_os_error();
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &previous, std::ptr::null_mut()) };
    if pid < 0 {
        let e = clone_error;
        return match e.raw_os_error() {
            Some(libc::ENOSYS | libc::E2BIG | libc::EINVAL) => Ok(None),
            _ => Err(e),
        };
    }
    drop(err_write);
    exec_result(nix::unistd::Pid::from_raw(pid as i32), &err_read).map(Some)
}

/// What the child execs, as C strings and pointer arrays made before the clone.
struct Exec {
    program: std::ffi::CString,
    _args: Vec<std::ffi::CString>,
    _vars: Vec<std::ffi::CString>,
    arg_ptrs: Vec<*const libc::c_char>,
    env_ptrs: Vec<*const libc::c_char>,
}

impl Exec {
    fn prepare(
        argv: &[std::ffi::OsString],
        env: &[(std::ffi::OsString, std::ffi::OsString)],
    ) -> io::Result<Exec> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let cstring =
            |b: &[u8]| CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
        let program = cstring(argv.first().ok_or(io::ErrorKind::InvalidInput)?.as_bytes())?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| cstring(a.as_bytes()))
            .collect::<io::Result<_>>()?;
        let vars: Vec<CString> = env
            .iter()
            .map(|(k, v)| cstring(&[k.as_bytes(), b"=", v.as_bytes()].concat()))
            .collect::<io::Result<_>>()?;
        let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());
        let mut env_ptrs: Vec<*const libc::c_char> = vars.iter().map(|v| v.as_ptr()).collect();
        env_ptrs.push(std::ptr::null());
        Ok(Exec {
            program,
            _args: args,
            _vars: vars,
            arg_ptrs,
            env_ptrs,
        })
    }

    /// The child: only async-signal-safe calls on data prepared before the clone, then
    /// exec; its errno goes to `err_write_fd` when the exec fails.
    ///
    /// # Safety
    /// Only in the child of a clone (or fork) made after `prepare`, in a copy of memory.
    unsafe fn run_in_child(
        &self,
        tty: Option<std::os::fd::RawFd>,
        own_group: bool,
        err_write_fd: i32,
    ) -> ! {
        // SAFETY: every pointer is valid (made before the clone, in our copy of memory);
        // sigaction, dup2, setpgid, sigprocmask, execve, write and _exit are
        // async-signal-safe.
        unsafe {
            // Handlers back to the default before signals are let in (exec would do it).
            for signal in 1..=libc::SIGRTMAX() {
                let mut current: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut current) == 0
                    && current.sa_sigaction != libc::SIG_DFL
                    && current.sa_sigaction != libc::SIG_IGN
                {
                    libc::signal(signal, libc::SIG_DFL);
                }
            }
            if let Some(tty) = tty {
                for fd in 0..3 {
                    libc::dup2(tty, fd);
                }
            }
            if own_group {
                libc::setpgid(0, 0);
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::execve(
                self.program.as_ptr(),
                self.arg_ptrs.as_ptr(),
                self.env_ptrs.as_ptr(),
            );
            let errno = *libc::__errno_location();
            libc::write(err_write_fd, (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        }
    }
}

/// The spawned child, or why its exec failed (its errno on the pipe; the child, which
/// exits at once, reaped).
fn exec_result(
    pid: nix::unistd::Pid,
    err_read: &std::os::fd::OwnedFd,
) -> io::Result<nix::unistd::Pid> {
    let mut errno = [0u8; 4];
    match nix::unistd::read(err_read, &mut errno) {
        Ok(4) => {
            let _ = nix::sys::wait::waitpid(pid, None);
            Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)))
        }
        _ => Ok(pid),
    }
}
