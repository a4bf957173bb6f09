//! The helper mode: `sbx-shell __sbx_helper SPEC PROGRAM ARG0 [ARGS...]`.
//!
//! The supervisor never execs the user's program itself; it spawns this binary again in
//! helper mode (inside bwrap, when that backend is on), which prepares the process and then
//! execs the program in place (same pid). It is single-threaded and runs our own code only,
//! so it is where process state that must be set from inside the child is set, in order:
//!
//! 0. with a network allow-list inside bwrap, open the proxy's port in the sandbox's network
//!    namespace and hand the listening socket to sbx-shell (`netproxy`);
//! 0. in guard mode (Landlock without bwrap), fork: the parent stays behind as the guard of
//!    the program's process tree (`guard.rs`), the child goes on;
//! 1. new session, and fd 0 (the inner pty) as the controlling terminal, when asked;
//! 2. every signal disposition back to default, the signal mask emptied (a parent that
//!    ignores or blocks signals must not pass that on);
//! 3. resource limits;
//! 4. every fd above 2 marked close-on-exec (closing them would kill std's exec-error pipe);
//! 5. Linux: capabilities dropped and no_new_privs; Landlock; seccomp (`confine.rs`);
//! 6. execvp; on failure a message and 127 (not found) or 126 (not runnable), as shells do.
//!
//! A step that fails ends the helper with 126 before anything runs: never a weaker sandbox.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow};

use crate::exit;

use spec::{parse_helper_args, HelperSpec, ProcessLimits, ProxyListen};

pub mod spec;

#[cfg(target_os = "linux")]
mod confine;
#[cfg(target_os = "linux")]
mod guard;

/// Run the helper mode with the arguments after `__sbx_helper`. Returns only on failure.
pub fn run(args: &[OsString]) -> ExitCode {
    let parsed = match parse_helper_args(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("sbx-shell: internal error: helper mode: {e}");
            return ExitCode::from(exit::NOT_RUNNABLE);
        }
    };
    if let Some(listen) = parsed.spec.proxy_listen {
        if let Err(e) = hand_over_proxy_port(listen) {
            eprintln!("sbx-shell: cannot open the network proxy's port: {e}");
            return ExitCode::from(exit::NOT_RUNNABLE);
        }
    }
    if parsed.spec.guard {
        match split_off_guard(parsed.spec.stop_notify_fd) {
            Ok(Some(code)) => return code,
            Ok(None) => {}
            Err(e) => {
                eprintln!("sbx-shell: cannot start the process guard: {e}");
                return ExitCode::from(exit::NOT_RUNNABLE);
            }
        }
    }
    if let Err(e) = prepare(&parsed.spec) {
        eprintln!("sbx-shell: cannot prepare the sandbox: {e}");
        return ExitCode::from(exit::NOT_RUNNABLE);
    }
    let errno = exec(&parsed.program, &parsed.argv);
    let program = parsed.program.to_string_lossy();
    eprintln!("sbx-shell: cannot run {program}: {}", errno.desc());
    ExitCode::from(if errno == Errno::ENOENT {
        exit::NOT_FOUND
    } else {
        exit::NOT_RUNNABLE
    })
}

/// Guard mode: `Some(code)` in the guard once the program's tree is gone, `None` in the
/// child that goes on to exec the program.
#[cfg(target_os = "linux")]
fn split_off_guard(stop_notify_fd: Option<i32>) -> io::Result<Option<ExitCode>> {
    apply_default_signals()?;
    guard::split(stop_notify_fd)
}

#[cfg(not(target_os = "linux"))]
fn split_off_guard(_stop_notify_fd: Option<i32>) -> io::Result<Option<ExitCode>> {
    Err(io::Error::other("guard mode exists on Linux only"))
}

/// Listen on the loopback port inside the sandbox's network namespace and send the socket
/// to sbx-shell's proxy, which then accepts there; close both here.
fn hand_over_proxy_port(listen: ProxyListen) -> io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: sbx-shell passed this fd for this purpose; nothing else in the helper owns it.
    let channel = unsafe { OwnedFd::from_raw_fd(listen.channel_fd) };
    let listener = std::net::TcpListener::bind(("127.0.0.1", listen.port))?;
    crate::netproxy::send_fd(channel.as_raw_fd(), listener.as_raw_fd())
}

fn prepare(spec: &HelperSpec) -> Result<(), String> {
    if spec.new_session {
        apply_new_session().map_err(|e| e.to_string())?;
    }
    apply_default_signals().map_err(|e| e.to_string())?;
    apply_limits(&spec.limits)?;
    apply_cloexec_above_stderr().map_err(|e| e.to_string())?;
    confine(spec)
}

#[cfg(target_os = "linux")]
fn confine(spec: &HelperSpec) -> Result<(), String> {
    if spec.drop_privileges {
        confine::apply_drop_privileges().map_err(|e| e.to_string())?;
    }
    if let Some(ruleset) = &spec.landlock {
        confine::apply_landlock(ruleset).map_err(|e| e.to_string())?;
    }
    if let Some(filter) = &spec.seccomp {
        confine::apply_seccomp(filter).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn confine(spec: &HelperSpec) -> Result<(), String> {
    if spec.drop_privileges || spec.landlock.is_some() || spec.seccomp.is_some() {
        return Err("Landlock and seccomp exist on Linux only".into());
    }
    Ok(())
}

/// A new session with fd 0 as its controlling terminal (this process only).
fn apply_new_session() -> io::Result<()> {
    // EPERM: already a session leader (e.g. a launcher made us one); that is fine.
    match nix::unistd::setsid() {
        Ok(_) | Err(Errno::EPERM) => {}
        Err(e) => return Err(e.into()),
    }
    // SAFETY: TIOCSCTTY takes an integer argument (0: do not steal) and no pointers.
    let rc = unsafe { libc::ioctl(0, libc::TIOCSCTTY as _, 0) };
    if rc == -1 {
        return Err(io::Error::new(
            io::Error::last_os_error().kind(),
            format!("TIOCSCTTY on fd 0: {}", io::Error::last_os_error()),
        ));
    }
    Ok(())
}

/// Every signal to SIG_DFL and an empty mask (this process only).
fn apply_default_signals() -> io::Result<()> {
    for signal in 1..signal_count() {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            set_default_disposition(signal);
        }
    }
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
    Ok(())
}

/// SIG_DFL for `signal`, through the raw syscall: glibc's posix_spawn leaves its two
/// internal signals (32, 33) *ignored* in a spawned child and its sigaction() refuses to
/// touch them, so only the kernel interface can reset them.
#[cfg(target_os = "linux")]
fn set_default_disposition(signal: i32) {
    // A zeroed kernel `struct sigaction` is {SIG_DFL, no flags, no restorer, empty mask} on
    // every Linux ABI; 32 bytes covers its largest layout.
    let default = [0u64; 4];
    let sigset_size = std::mem::size_of::<u64>();
    // SAFETY: rt_sigaction reads one kernel sigaction from `default`, which is valid and
    // large enough, and writes nothing (old action pointer is null).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            default.as_ptr(),
            std::ptr::null_mut::<u8>(),
            sigset_size,
        )
    };
}

#[cfg(not(target_os = "linux"))]
fn set_default_disposition(signal: i32) {
    // SAFETY: setting SIG_DFL installs no code of ours.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
}

fn signal_count() -> i32 {
    #[cfg(target_os = "linux")]
    {
        libc::SIGRTMAX() + 1
    }
    #[cfg(not(target_os = "linux"))]
    {
        32
    }
}

/// The soft open-file limit the child should get: the hard limit, clamped to what this
/// platform's setrlimit accepts. None when there is nothing to raise.
pub fn nofile_target(soft: u64, hard: u64, platform_cap: Option<u64>) -> Option<u64> {
    let target = platform_cap.map_or(hard, |cap| hard.min(cap));
    (target > soft).then_some(target)
}

/// Set the resource limits (this process, and what it starts). The open-file raise is best
/// effort; a limit that was asked for and cannot be set is an error.
fn apply_limits(limits: &ProcessLimits) -> Result<(), String> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let set = |resource: Resource, name: &str, value: u64| {
        let (_, hard) = getrlimit(resource).map_err(|e| format!("getrlimit {name}: {e}"))?;
        if value > hard {
            return Err(format!(
                "cannot set {name} to {value}: the hard limit is {hard}\nHint: ask for at most {hard}, or raise the hard limit first (ulimit -H)"
            ));
        }
        setrlimit(resource, value, value).map_err(|e| format!("setrlimit {name} {value}: {e}"))
    };
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if let Some(count) = limits.open_files {
            setrlimit(Resource::RLIMIT_NOFILE, count.min(hard), hard)
                .map_err(|e| format!("setrlimit RLIMIT_NOFILE {count}: {e}"))?;
        } else if limits.raise_nofile {
            if let Some(target) = nofile_target(soft, hard, nofile_platform_cap()) {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, target, hard);
            }
        }
    }
    if let Some(seconds) = limits.cpu_seconds {
        // SIGXCPU at the limit, SIGKILL one second later if it is caught or ignored.
        let (_, hard) =
            getrlimit(Resource::RLIMIT_CPU).map_err(|e| format!("getrlimit RLIMIT_CPU: {e}"))?;
        if seconds >= hard {
            return Err(format!("cannot set RLIMIT_CPU to {seconds}: the hard limit is {hard}\nHint: ask for less than {hard}"));
        }
        setrlimit(Resource::RLIMIT_CPU, seconds, (seconds + 1).min(hard))
            .map_err(|e| format!("setrlimit RLIMIT_CPU {seconds}: {e}"))?;
    }
    if let Some(bytes) = limits.data_bytes {
        set(Resource::RLIMIT_DATA, "RLIMIT_DATA", bytes)?;
    }
    if let Some(count) = limits.processes {
        set_nproc(count)?;
    }
    if limits.no_core_dumps {
        set(Resource::RLIMIT_CORE, "RLIMIT_CORE", 0)?;
    }
    Ok(())
}

/// RLIMIT_NPROC, soft and hard (nix has no name for it on macOS).
fn set_nproc(count: u64) -> Result<(), String> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `current`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut current) } == -1 {
        return Err(format!(
            "getrlimit RLIMIT_NPROC: {}",
            io::Error::last_os_error()
        ));
    }
    let hard: u64 = current.rlim_max;
    if count > hard {
        return Err(format!(
            "cannot set RLIMIT_NPROC to {count}: the hard limit is {hard}\nHint: ask for at most {hard}"
        ));
    }
    let value: libc::rlim_t = count;
    let wanted = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads one rlimit from `wanted`.
    if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &wanted) } == -1 {
        return Err(format!(
            "setrlimit RLIMIT_NPROC {count}: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

fn nofile_platform_cap() -> Option<u64> {
    #[cfg(target_os = "macos")]
    {
        // setrlimit(RLIMIT_NOFILE) above OPEN_MAX fails on macOS, even as root.
        Some(10240)
    }
    #[cfg(not(target_os = "macos"))]
    {
        None
    }
}

/// Mark every fd above 2 close-on-exec (this process only).
fn apply_cloexec_above_stderr() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes fd flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if rc == 0 {
            return Ok(());
        }
    }
    let fds: Vec<i32> = std::fs::read_dir("/dev/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_SETFD only changes the fd's flags; a stale fd gives EBADF, ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// execvp; returns only on failure, with the reason.
fn exec(program: &OsString, argv: &[OsString]) -> Errno {
    let Ok(program) = CString::new(program.as_bytes()) else {
        return Errno::EINVAL;
    };
    let Ok(argv) = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
    else {
        return Errno::EINVAL;
    };
    match nix::unistd::execvp(&program, &argv) {
        Err(errno) => errno,
        Ok(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_rises_to_the_hard_limit_within_the_platform_cap() {
        assert_eq!(nofile_target(1024, 524288, None), Some(524288));
        assert_eq!(nofile_target(256, u64::MAX, Some(10240)), Some(10240));
        assert_eq!(nofile_target(4096, 4096, None), None);
        assert_eq!(nofile_target(20000, u64::MAX, Some(10240)), None);
    }
}
