//! The helper mode: `sbx-shell __sbx_helper FD PROGRAM ARG0 [ARGS...]`, its spec read from
//! the inherited fd FD (`spec`).
//!
//! The supervisor never execs the user's program itself; it spawns this binary again in
//! helper mode (inside bwrap, when that backend is on), which prepares the process and then
//! execs the program in place (same pid). It is single-threaded and runs our own code only,
//! so it is where process state that must be set from inside the child is set, in order:
//!
//! 0. inside bwrap, check the writable mounts, seal, pin, protect and hide what the plan
//!    says (`sandbox::bwrap::mounts`; a socket that vanished since sbx-shell looked is
//!    skipped, any other difference ends the helper);
//! 0. inside bwrap with an allow-list or no network, in a network namespace of its own,
//!    open the proxy's port, the name server's and the host services' (`localhost:PORT`
//!    on the allow-list), and hand the sockets to sbx-shell (`netproxy`); then drop every
//!    capability;
//! 0. in guard mode, fork: the parent stays behind as the guard of the program's process
//!    tree (`guard.rs`), the child goes on; with a pty, the guard first leads a new session
//!    with fd 0 as its controlling terminal, and the child takes a foreground process
//!    group of its own in it (not orphaned: ^Z stops it); the guard makes the sockets a
//!    published port is reached through (`netsockets.rs`);
//! 1. without a guard: new session, and fd 0 (the inner pty) as the controlling terminal,
//!    when asked;
//! 2. every signal disposition back to default, the signal mask emptied (a parent that
//!    ignores or blocks signals must not pass that on);
//! 3. resource limits;
//! 4. every fd above 2 marked close-on-exec (closing them would kill std's exec-error pipe);
//! 5. Linux: capabilities dropped and no_new_privs; Landlock; seccomp (`confine.rs`);
//! 6. execvp; on failure a message and 127 (not found) or 126 (not runnable), as shells do.
//!
//! A step that fails ends the helper with 126 before anything runs: never a weaker sandbox.
//! Each step fails with its own `HelperError` variant. What differs per platform lives in
//! one module, `os` (`linux.rs`, `other.rs`), gated once.

#[cfg(target_os = "linux")]
pub mod container;
#[cfg_attr(not(target_os = "linux"), allow(dead_code, unused_imports))]
pub mod mediator;

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow};
use thiserror::Error;

use crate::sys::exit;
use limits::LimitError;
use spec::{parse_helper_args, read_spec, HelperSpec, ProxyListen, SpecError};

mod limits;
mod parts;
pub use parts::MountError;
pub mod spec;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;
#[cfg(not(target_os = "linux"))]
#[path = "other.rs"]
mod os;

pub use os::ConfineError;

/// Why the helper could not prepare the process or run the program: one variant per step.
#[derive(Debug, Error)]
pub enum HelperError {
    #[error("internal error: helper mode: {0}")]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Mount(#[from] MountError),
    #[error("cannot open the network proxy's port: {0}")]
    ProxyPort(#[source] io::Error),
    #[error("cannot start the process guard: {0}")]
    Guard(#[source] io::Error),
    #[error("cannot prepare the sandbox: {0}")]
    NewSession(#[source] io::Error),
    #[error("cannot prepare the sandbox: {0}")]
    Signals(#[source] io::Error),
    #[error("cannot prepare the sandbox: {0}")]
    Limits(#[from] LimitError),
    #[error("cannot prepare the sandbox: {0}")]
    CloseOnExec(#[source] io::Error),
    #[error("cannot prepare the sandbox: {0}")]
    Confine(#[from] ConfineError),
    #[error(
        "cannot run root's program as another host id: {0}\nHint: this needs id-mapped mounts of \
        the writable places (Linux 5.12, their file systems' support); `--backend landlock` runs \
        without"
    )]
    RootAs(#[source] io::Error),
    #[error("cannot be the container's user: {0}")]
    ShownAs(String),
    #[error("cannot run {program}: {}", .errno.desc())]
    Exec { program: String, errno: Errno },
}

impl HelperError {
    /// As shells report it: 127 for a program not found, else 126.
    fn exit_code(&self) -> u8 {
        match self {
            HelperError::Exec {
                errno: Errno::ENOENT,
                ..
            } => exit::NOT_FOUND,
            _ => exit::NOT_RUNNABLE,
        }
    }
}

/// Run the helper mode with the arguments after `__sbx_helper`. Returns only on failure, or
/// in the guard once the program's tree is gone.
pub fn run(args: &[OsString]) -> ExitCode {
    match run_steps(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("sbx-shell: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

/// The steps in the module doc's order; `Ok` only in the guard.
fn run_steps(args: &[OsString]) -> Result<ExitCode, HelperError> {
    let parsed = parse_helper_args(args)?;
    let spec = read_spec(parsed.spec_fd)?;
    let root_as = os::take_root_as(&spec).map_err(HelperError::RootAs)?;
    os::check_mounted(&spec.mounted)?;
    if !spec.mounts.is_empty() {
        os::apply_mounts(&spec.mounts, root_as.as_ref())?;
    }
    if let Some(listen) = &spec.proxy_listen {
        hand_over_proxy_port(listen).map_err(HelperError::ProxyPort)?;
    }
    // Root's program as another host id: the helper itself becomes it, before its
    // capabilities go (the id-mapped copies of the trees need CAP_SYS_ADMIN), so that the
    // guard acts with the program's rights through the same id-mapped trees.
    if let Some(root_as) = root_as {
        os::become_root_as(root_as).map_err(HelperError::RootAs)?;
    }
    let name_server = spec
        .proxy_listen
        .as_ref()
        .is_some_and(|l| l.lookups_fd.is_some());
    if !spec.mounts.is_empty() || name_server {
        // CAP_SYS_ADMIN was kept for the mounts only, CAP_NET_BIND_SERVICE for the name
        // server's port: gone before anything else runs (the guard's CAP_SETUID and
        // CAP_SETGID for root's reads go with the program's side: `confine`).
        os::confine_privileges(spec.root_reads.is_some(), spec.shown_as.is_some())?;
    }
    let mut names = None;
    if spec.guard {
        // The session's token (`protect::gitstate::bind`): in the program's environment,
        // and the guard's, which binds the commands of git's state to it.
        os::set_session_token();
        apply_default_signals().map_err(HelperError::Guard)?;
        // The guard leads the session and the program gets a process group of its own in
        // it: a group whose parent sits in the same session is not orphaned, so the
        // kernel delivers the SIGTSTP of ^Z (or of the program's own `kill(0, SIGTSTP)`)
        // instead of discarding it.
        if spec.new_session {
            apply_new_session().map_err(HelperError::NewSession)?;
        }
        match os::split_off_guard(&spec).map_err(HelperError::Guard)? {
            parts::Split::Guard(code) => return Ok(code),
            parts::Split::Program { names: channel } => names = channel,
        }
        if spec.new_session {
            apply_foreground_group().map_err(HelperError::NewSession)?;
        }
    }
    prepare(&spec, names)?;
    let errno = exec(&parsed.program, &parsed.argv);
    Err(HelperError::Exec {
        program: parsed.program.to_string_lossy().into_owned(),
        errno,
    })
}

/// Listen on the loopback port inside the sandbox's network namespace and send the socket
/// to sbx-shell's proxy, which then accepts there, and the name server's (UDP port 53) and
/// the host services' (`services`) likewise; close all here.
fn hand_over_proxy_port(listen: &ProxyListen) -> io::Result<()> {
    use crate::sys::files::take_inherited;
    use std::os::fd::AsRawFd;
    // Each channel sbx-shell passed for this one purpose: owned here, closed here.
    let channel = take_inherited(listen.channel_fd)?;
    if listen.unshare {
        os::private_network()?;
    }
    let listener = std::net::TcpListener::bind(("127.0.0.1", listen.port))?;
    crate::sys::fdpass::send_fd(channel.as_raw_fd(), listener.as_raw_fd())?;
    if let Some(fd) = listen.lookups_fd {
        let channel = take_inherited(fd)?;
        let socket = std::net::UdpSocket::bind(("127.0.0.1", 53))?;
        crate::sys::fdpass::send_fd(channel.as_raw_fd(), socket.as_raw_fd())?;
    }
    if let Some(fd) = listen.services_fd {
        let channel = take_inherited(fd)?;
        for &port in &listen.services {
            let v4 = std::net::TcpListener::bind(("127.0.0.1", port))?;
            crate::sys::fdpass::send_fd(channel.as_raw_fd(), v4.as_raw_fd())?;
            // IPv6's loopback where the namespace has one (`localhost` may be `::1`).
            if let Ok(v6) = std::net::TcpListener::bind(("::1", port)) {
                crate::sys::fdpass::send_fd(channel.as_raw_fd(), v6.as_raw_fd())?;
            }
        }
    }
    Ok(())
}

fn prepare(spec: &HelperSpec, names: Option<OwnedFd>) -> Result<(), HelperError> {
    if let Some(user) = &spec.shown_as {
        os::show_as(user).map_err(HelperError::ShownAs)?;
    }
    if spec.new_session && !spec.guard {
        apply_new_session().map_err(HelperError::NewSession)?;
    }
    apply_default_signals().map_err(HelperError::Signals)?;
    limits::apply(&spec.limits)?;
    crate::sys::files::cloexec_above_stderr().map_err(HelperError::CloseOnExec)?;
    Ok(os::confine(spec, names)?)
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

/// A process group of our own, made the terminal's foreground (this process only; the
/// signals are still blocked here, so tcsetpgrp cannot stop us with SIGTTOU).
fn apply_foreground_group() -> io::Result<()> {
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))?;
    use std::os::fd::AsFd;
    nix::unistd::tcsetpgrp(std::io::stdin().as_fd(), nix::unistd::getpgrp())?;
    Ok(())
}

/// Every signal to SIG_DFL and an empty mask (this process only).
fn apply_default_signals() -> io::Result<()> {
    use crate::sys::handlers::{set_default_disposition, signal_count};
    for signal in 1..signal_count() {
        if signal != libc::SIGKILL && signal != libc::SIGSTOP {
            set_default_disposition(signal);
        }
    }
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
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
