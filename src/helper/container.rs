//! The two ends of a container session's handover (`sandbox::container`, Linux).
//!
//! **The courier** (`sbx-shell __sbx_courier DIR NAME FD LIFELINE -- ENGINE ARGV…`) is
//! what sbx-shell spawns where it would spawn the helper under Landlock alone, so it
//! inherits exactly what the helper would: the terminal or stdio as 0–2, the spec, the
//! lifeline, the guard's pipes, and the program's environment. It leads a session of its
//! own (the outer terminal's signals are sbx-shell's to pass on), listens on `DIR`'s
//! socket, runs the engine's client with only the variables read from the pipe `FD` (how
//! the client finds its engine; read and closed first, so never passed on), and hands
//! everything else it inherited to the first process that connects — the container's
//! entry — then closes the socket. Once the program runs, it passes on the signals
//! sbx-shell sends it to the client, which passes them to the container's first process
//! (the guard); before, an ending signal turns the entry away instead, so the client is
//! never killed while it creates the container. It ends as the client does, and when the
//! client was killed or ended before the entry connected (a container may then be created
//! and never started) it removes the container `NAME` first.
//!
//! **The entry** (`sbx-shell __sbx_entry SOCKET -- HELPER ARGV…`, the container's first
//! process) connects, puts each descriptor at the number it had in the courier, takes the
//! environment, and execs the helper in its place (pid 1: the guard, the container's init).
//!
//! What travels: one message with the descriptors' numbers (`[0,1,2,…]`, JSON) and the
//! descriptors, the last of them a pipe with the environment (`VAR=VALUE\0…`).

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::ExitCode;

use anyhow::{anyhow, Context as _};
use nix::sys::signal::{SigSet, Signal};

use crate::sys::exit;

use crate::sandbox::container::SOCKET_NAME;

/// The signals the courier passes on to the engine's client.
const PASSED: [Signal; 8] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGCONT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// `__sbx_courier`: returns the client's exit code (128 + N when a signal ended it).
pub fn courier(args: &[OsString]) -> ExitCode {
    match run_courier(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("sbx-shell: cannot start the container: {e:#}");
            ExitCode::from(exit::NOT_RUNNABLE)
        }
    }
}

/// The courier's arguments: its directory, the container's name, the client's
/// environment (read from its pipe), sbx-shell's lifeline (`process::Lifeline`: also
/// passed on), the client's argv.
struct CourierArgs<'a> {
    dir: &'a OsStr,
    name: &'a OsStr,
    env: Vec<(OsString, OsString)>,
    lifeline: OwnedFd,
    argv: &'a [OsString],
}

fn parse_courier(args: &[OsString]) -> anyhow::Result<CourierArgs<'_>> {
    let [dir, name, fd, lifeline, dashes, argv @ ..] = args else {
        return Err(anyhow!("expected DIR NAME FD LIFELINE -- ARGV…"));
    };
    if dashes != "--" || argv.is_empty() {
        return Err(anyhow!("expected DIR NAME FD LIFELINE -- ARGV…"));
    }
    let number = |fd: &OsStr| -> Option<RawFd> {
        fd.to_str()
            .and_then(|fd| fd.parse().ok())
            .filter(|fd| *fd > 2)
    };
    let fd = number(fd).ok_or_else(|| anyhow!("the client's environment's fd is not a number"))?;
    let lifeline = number(lifeline)
        .ok_or_else(|| anyhow!("the lifeline's fd is not a number"))
        .and_then(|fd| crate::sys::files::take_inherited(fd).context("no lifeline"))?;
    let pipe =
        crate::sys::files::take_inherited(fd).context("cannot read the client's environment")?;
    let env = read_env(pipe)?
        .into_iter()
        .filter_map(|kv| {
            let bytes = kv.into_bytes();
            let eq = bytes.iter().position(|b| *b == b'=')?;
            Some((
                OsString::from_vec(bytes[..eq].to_vec()),
                OsString::from_vec(bytes[eq + 1..].to_vec()),
            ))
        })
        .collect();
    Ok(CourierArgs {
        dir,
        name,
        env,
        lifeline,
        argv,
    })
}

fn run_courier(args: &[OsString]) -> anyhow::Result<u8> {
    // Blocked before the client exists: an ending signal from then on turns the entry away
    // (below) rather than end this process while the client creates the container — which
    // sbx-shell, seeing the courier gone, would end midway, leaving a container created and
    // never started. (The client starts with an empty mask: `Command` resets it.)
    let mask: SigSet = PASSED.iter().copied().collect();
    mask.thread_block().context("cannot block signals")?;
    let args = parse_courier(args)?;
    // A session of its own: a hang-up of the outer terminal is sbx-shell's to pass on.
    let _ = nix::unistd::setsid();
    let inherited = inherited_fds()?;
    let env = crate::sys::process::Handover::new(environment_bytes())
        .context("cannot pass the environment")?;
    std::env::set_current_dir(args.dir).context("cannot enter the session's directory")?;
    let _ = std::fs::remove_file(SOCKET_NAME);
    let listener = std::os::unix::net::UnixListener::bind(SOCKET_NAME)
        .context("cannot listen for the container")?;
    let pid = spawn_client(&args)?;
    let signals =
        nix::sys::signalfd::SignalFd::with_flags(&mask, nix::sys::signalfd::SfdFlags::SFD_CLOEXEC)
            .context("cannot read signals")?;
    let pidfd =
        crate::sys::pidfd::open(pid.as_raw() as u32, 0).context("cannot watch the client")?;
    let mut listener = Some(listener);
    // Told to end before the container runs the program: the client is left to finish
    // starting it (killed midway, it can leave a container created and never started),
    // and the entry is turned away, so the container ends by itself.
    let mut ending: Option<Signal> = None;
    let mut lifeline = Some(&args.lifeline);
    let mut deadline: Option<std::time::Instant> = None;
    loop {
        let watched = lifeline.filter(|_| listener.is_some());
        match wait_for(listener.as_ref(), watched, &signals, &pidfd, deadline)? {
            Ready::Connection => {
                if let Some(l) = listener.take() {
                    hand_over(&l, &inherited, env.child_fd(), ending.is_some());
                    let _ = std::fs::remove_file(SOCKET_NAME);
                }
            }
            Ready::Signal => {
                let Ok(Some(info)) = signals.read_signal() else {
                    continue;
                };
                let Ok(signal) = Signal::try_from(info.ssi_signo as i32) else {
                    continue;
                };
                if listener.is_none() {
                    let _ = nix::sys::signal::kill(pid, signal);
                } else if ENDING.contains(&signal) {
                    ending.get_or_insert(signal);
                }
            }
            Ready::SupervisorGone => {
                // sbx-shell is gone before the program ran (killed): the session is over.
                // The entry is turned away; the client is left to finish the container's
                // start (killed midway, it could leave it created and never started) for
                // `CLIENT_GRACE`, then killed, and the container removed (below): a client
                // can hang between creating and starting it (seen with docker 28's client
                // and a 20.10 engine, when its sbx-shell was killed).
                lifeline = None;
                ending.get_or_insert(Signal::SIGKILL);
                deadline = Some(std::time::Instant::now() + CLIENT_GRACE);
            }
            Ready::Deadline => {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                deadline = None;
            }
            Ready::ClientEnded => break,
        }
    }
    let code = client_end(&args, pid, listener.is_none());
    // Turned away, the entry's failure is not the program's: the session ends as the
    // program would have, by the signal.
    Ok(ending.map_or(code, |signal| exit::signal_exit_code(signal as i32)))
}

/// The engine's client, with only its own variables and no input.
fn spawn_client(args: &CourierArgs<'_>) -> anyhow::Result<nix::unistd::Pid> {
    let client = std::process::Command::new(&args.argv[0])
        .args(&args.argv[1..])
        .env_clear()
        .envs(args.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run {}", args.argv[0].to_string_lossy()))?;
    Ok(nix::unistd::Pid::from_raw(
        i32::try_from(client.id()).unwrap_or(i32::MAX),
    ))
}

/// The client ended (`entered`: after the entry connected): its exit code, the container
/// removed where it may be left, the end recorded for sbx-shell.
fn client_end(args: &CourierArgs<'_>, pid: nix::unistd::Pid, entered: bool) -> u8 {
    let _ = std::fs::remove_file(SOCKET_NAME);
    let (code, killed) = match nix::sys::wait::waitpid(pid, None) {
        Ok(nix::sys::wait::WaitStatus::Exited(_, code)) => {
            (u8::try_from(code).unwrap_or(exit::FAILURE), false)
        }
        Ok(nix::sys::wait::WaitStatus::Signaled(_, signal, _)) => {
            (exit::signal_exit_code(signal as i32), true)
        }
        _ => (exit::FAILURE, false),
    };
    // Killed, or ended before the entry ever connected (its start failed: a mount's
    // source gone with a killed sbx-shell's directory), the client may have left a
    // container created and never started, which never ends by itself.
    if killed || !entered {
        remove_container(args);
    }
    // sbx-shell removes the container itself unless this says the client saw it through.
    let _ = std::fs::File::create(crate::sandbox::container::ENDED_NAME);
    code
}

/// This process's environment as the entry reads it: `VAR=VALUE\0…`.
fn environment_bytes() -> Vec<u8> {
    std::env::vars_os()
        .flat_map(|(k, v)| {
            let mut kv = k.into_vec();
            kv.push(b'=');
            kv.extend(v.into_vec());
            kv.push(0);
            kv
        })
        .collect()
}

/// The signals that end a session: before the container runs the program, it never will.
const ENDING: [Signal; 4] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
];

/// The client was killed, or ended before the container's entry connected: a container it
/// created may never have started, and so never end by itself. Removed by name, whatever
/// its state.
fn remove_container(args: &CourierArgs<'_>) {
    let _ = std::process::Command::new(&args.argv[0])
        .args(["rm", "--force"])
        .arg(args.name)
        .env_clear()
        .envs(args.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// How long the client may go on starting a container whose sbx-shell is gone.
const CLIENT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

enum Ready {
    Connection,
    Signal,
    ClientEnded,
    /// sbx-shell's lifeline reads as end-of-file: it is gone.
    SupervisorGone,
    Deadline,
}

/// What comes first: a signal, the client's end (`pidfd`), the entry's connection (while
/// `listener` is there), sbx-shell's end (while `lifeline` is watched), the deadline.
fn wait_for(
    listener: Option<&std::os::unix::net::UnixListener>,
    lifeline: Option<&OwnedFd>,
    signals: &nix::sys::signalfd::SignalFd,
    pidfd: &OwnedFd,
    deadline: Option<std::time::Instant>,
) -> anyhow::Result<Ready> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        let mut fds = vec![
            PollFd::new(signals.as_fd(), PollFlags::POLLIN),
            PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        ];
        if let Some(l) = listener {
            fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
        }
        let gone_at = fds.len();
        if let Some(l) = lifeline {
            fds.push(PollFd::new(l.as_fd(), PollFlags::POLLIN));
        }
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(at) => {
                let left = at.saturating_duration_since(std::time::Instant::now());
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
            }
        };
        match poll(&mut fds, timeout) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("cannot wait"),
            Ok(0) if deadline.is_some() => return Ok(Ready::Deadline),
            Ok(_) => {}
        }
        let ready = |i: usize| {
            fds.get(i)
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty())
        };
        return Ok(if ready(0) {
            Ready::Signal
        } else if listener.is_some() && ready(2) {
            Ready::Connection
        } else if ready(1) {
            Ready::ClientEnded
        } else if lifeline.is_some() && ready(gone_at) {
            Ready::SupervisorGone
        } else {
            continue;
        });
    }
}

/// Accept the entry's connection and send it the inherited descriptors `fds` and the
/// environment's pipe `env` — nothing when the session is `ending`; a failure leaves the
/// entry to end with its own message.
fn hand_over(listener: &std::os::unix::net::UnixListener, fds: &[RawFd], env: RawFd, ending: bool) {
    let Ok((stream, _)) = listener.accept() else {
        return;
    };
    if ending {
        return;
    }
    let numbers = serde_json::to_vec(fds).unwrap_or_default();
    let mut all = fds.to_vec();
    all.push(env);
    if let Err(e) = crate::sys::fdpass::send_fds(stream.as_raw_fd(), &all, &numbers) {
        eprintln!("sbx-shell: cannot hand the session to the container: {e}");
    }
}

/// The descriptors this process inherited, to pass on (`files::take_inheritable_fds`:
/// the engine's client gets none of them).
fn inherited_fds() -> anyhow::Result<Vec<RawFd>> {
    let fds = crate::sys::files::take_inheritable_fds()
        .context("cannot list this process's descriptors")?;
    if fds.len() + 1 > crate::sys::fdpass::MOST_FDS {
        return Err(anyhow!("too many descriptors to pass ({})", fds.len()));
    }
    Ok(fds)
}

/// `__sbx_entry`: returns only on failure (126), having said why.
pub fn entry(args: &[OsString]) -> ExitCode {
    match run_entry(args) {
        Ok(never) => match never {},
        Err(e) => {
            if !e.is::<TurnedAway>() {
                eprintln!("sbx-shell: the container's entry: {e:#}");
            }
            ExitCode::from(exit::NOT_RUNNABLE)
        }
    }
}

/// The courier sent nothing: the session ended before the program started (sbx-shell
/// says so; the entry ends quietly).
#[derive(Debug, thiserror::Error)]
#[error("turned away")]
struct TurnedAway;

fn run_entry(args: &[OsString]) -> anyhow::Result<std::convert::Infallible> {
    let [socket, dashes, argv @ ..] = args else {
        return Err(anyhow!("expected SOCKET -- ARGV…"));
    };
    if dashes != "--" || argv.is_empty() {
        return Err(anyhow!("expected SOCKET -- ARGV…"));
    }
    let stream = std::os::unix::net::UnixStream::connect(socket)
        .with_context(|| format!("cannot reach sbx-shell at {}", socket.to_string_lossy()))?;
    let (mut fds, numbers) = crate::sys::fdpass::receive_fds(&OwnedFd::from(stream))
        .context("cannot receive the session")?;
    if fds.is_empty() && numbers.is_empty() {
        return Err(TurnedAway.into());
    }
    let numbers: Vec<RawFd> =
        serde_json::from_slice(&numbers).context("the session's message is not sbx-shell's")?;
    let env_pipe = fds
        .pop()
        .ok_or_else(|| anyhow!("no environment was passed"))?;
    if fds.len() != numbers.len() {
        return Err(anyhow!(
            "the session's descriptors do not match their numbers"
        ));
    }
    let env = read_env(env_pipe)?;
    place_fds(fds, &numbers)?;
    let cargs: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("an argument holds a NUL byte")?;
    let Err(errno) = nix::unistd::execve(&cargs[0], &cargs, &env);
    Err(anyhow!(
        "cannot run {}: {}",
        argv[0].to_string_lossy(),
        errno.desc()
    ))
}

/// The environment from its pipe: `VAR=VALUE\0…`.
fn read_env(pipe: OwnedFd) -> anyhow::Result<Vec<CString>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::from(pipe)
        .read_to_end(&mut bytes)
        .context("cannot read the environment")?;
    Ok(bytes
        .split(|b| *b == 0)
        .filter(|kv| !kv.is_empty())
        .filter_map(|kv| CString::new(kv).ok())
        .collect())
}

/// Each descriptor at its number, inherited by the helper: first all moved above every
/// number asked for (a received one may sit where another must go), then each put in
/// place (`dup2` leaves the copy inheritable).
fn place_fds(fds: Vec<OwnedFd>, numbers: &[RawFd]) -> anyhow::Result<()> {
    let floor = numbers.iter().copied().max().unwrap_or(0) + 1;
    let moved: Vec<OwnedFd> = fds
        .iter()
        .map(|fd| crate::sys::files::dup_above(fd.as_fd(), floor.max(3)))
        .collect::<std::io::Result<_>>()
        .context("cannot move a descriptor")?;
    drop(fds);
    for (fd, number) in moved.iter().zip(numbers) {
        crate::sys::files::dup_to(fd.as_fd(), *number).context("cannot place a descriptor")?;
    }
    Ok(())
}
