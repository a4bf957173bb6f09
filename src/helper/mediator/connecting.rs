//! A `connect` of a socket of another family than unix (Landlock alone), done for the program
//! by a thread of the guard's own, never let through as asked: the kernel would take the
//! descriptor and the address again, and another thread of the program could meanwhile have
//! put a unix socket at that number and a host socket's path in that memory. The thread
//! takes on the program's TCP rules first (`NetRules`: Landlock restricts the thread that
//! asks), so the kernel judges the destination as it would the program's; it connects the
//! program's very socket (copied), or, where the guard may not copy it, a socket like it
//! that takes its place (`Socket::Like`). A connect that waits for its peer takes a signal
//! for the program as the kernel's own does (`waiting`).
//!
//! Under bwrap, whose network namespace refuses what leaves it, a connect is only looked
//! at (`observe`): one to another machine is named at the end, and it goes on as asked.

use nix::poll::{PollFd, PollFlags, PollTimeout};
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use super::notify::{errno, Answer, Call, Listener, ERESTARTSYS};
use super::waiting::{signalled, Waker, LOOK_EVERY};
use super::NetRules;

/// The program's socket, as the guard can take it.
pub(super) enum Socket {
    /// The very socket (`pidfd_getfd`): connected here, it is connected for the program.
    Copied(OwnedFd),
    /// Where the guard may not copy it (a container's profile refuses `pidfd_getfd`): one
    /// like it, to connect and put in its place.
    Like(Like),
}

/// A socket like the program's, made from what `/proc` tells of it. Options set on the
/// program's socket before (and an address it was bound to) are not carried over.
pub(super) struct Like {
    pub(super) family: i32,
    pub(super) kind: i32,
    pub(super) protocol: i32,
    pub(super) nonblock: bool,
    pub(super) cloexec: bool,
}

impl Like {
    /// A new socket of this kind (close-on-exec in the guard; `cloexec` is the program's).
    pub(super) fn make(&self) -> io::Result<OwnedFd> {
        let flags = libc::SOCK_CLOEXEC
            | if self.nonblock {
                libc::SOCK_NONBLOCK
            } else {
                0
            };
        crate::sys::socket::socket(self.family, self.kind | flags, self.protocol)
    }
}

/// A connection in a sandbox with a network of its own (bwrap): one to another machine,
/// which that namespace has no route to, is reported (`Cause::Connect`), and so is one to a
/// port of the sandbox's loopback where nothing listens (the sbx-shell outside names it
/// only when that port of the host's loopback has a service: a host service not allowed,
/// `--net allow=localhost:PORT`). The call goes on as asked either way (the namespace is
/// what refuses it, so a look that another thread raced changes nothing but the report).
/// A port once seen listening is not looked at again (a look reads `/proc/net/tcp`).
pub(super) fn observe(threads: &super::threads::Threads, call: &Call) {
    let max = std::mem::size_of::<libc::sockaddr_storage>();
    let len = (call.args[2] as u32 as usize).min(max);
    let Ok(addr) = threads
        .known(call.pid)
        .and_then(|known| known.read(call.args[1], len))
    else {
        return;
    };
    let about = match super::loopback_port(&addr) {
        Some(port) if !listening_inside(port) => super::describe_addr(&addr),
        Some(_) => None,
        None => super::elsewhere(&addr),
    };
    if let Some(about) = about {
        let cause = crate::policy::report::Cause::Connect;
        super::report::refused_about(cause, std::path::Path::new("/"), about.as_bytes());
    }
}

/// Whether `port` of the sandbox's own network has a TCP listener or a UDP socket bound to
/// it (a UDP connect is never refused; the sandbox's name server is one), remembered once
/// seen (the proxy's port, the name server's, the program's servers).
fn listening_inside(port: u16) -> bool {
    thread_local! {
        static SEEN: std::cell::RefCell<std::collections::BTreeSet<u16>> = Default::default();
    }
    if SEEN.with(|seen| seen.borrow().contains(&port)) {
        return true;
    }
    let now = crate::host::sockets::tcp_listens(port) || crate::host::sockets::udp_bound(port);
    if now {
        SEEN.with(|seen| seen.borrow_mut().insert(port));
    }
    now
}

/// Answer `call`, a connect of `socket` to the address `addr`, from a thread of its own.
pub(super) fn start(
    listener: &Listener,
    call: &Call,
    socket: Socket,
    addr: Vec<u8>,
    net: NetRules,
    killable: bool,
) -> Answer {
    let spawned = listener.try_clone().and_then(|listener| {
        let call = *call;
        std::thread::Builder::new()
            .name("sbx-guard-connect".into())
            .spawn(move || {
                let answer = connect(&listener, &call, socket, &addr, net, killable);
                if let Some(answer) = answer {
                    listener.respond(&call, answer);
                }
            })
    });
    match spawned {
        Ok(_) => Answer::Sent,
        Err(e) => Answer::Done(errno(&e)),
    }
}

/// The connect, restricted as the program is; `None` when nobody waits for an answer.
fn connect(
    listener: &Listener,
    call: &Call,
    socket: Socket,
    addr: &[u8],
    net: NetRules,
    killable: bool,
) -> Option<Answer> {
    if let Err(e) = crate::helper::os::restrict_thread_network(&net) {
        eprintln!("sbx-shell: the guard cannot take on the program's network rules: {e}");
        return Some(Answer::Done(-i64::from(libc::EPERM)));
    }
    let (fd, replace) = match socket {
        Socket::Copied(fd) => (fd, None),
        Socket::Like(like) => match like.make() {
            Ok(fd) => (fd, Some(like.cloexec)),
            Err(e) => return Some(Answer::Done(errno(&e))),
        },
    };
    let mut done = match Waker::every(LOOK_EVERY) {
        Ok(_waker) => wait_connected(listener, call, &fd, addr, killable)?,
        Err(e) => -errno(&e),
    };
    if net.deny_tcp && done == i64::from(libc::EACCES) {
        match super::loopback_port(addr).filter(|port| !crate::host::sockets::tcp_listens(*port)) {
            // Nothing listens on that port of the host's loopback: refused as bare (a
            // program waiting for its server to come up retries on ECONNREFUSED only).
            Some(_) => done = i64::from(libc::ECONNREFUSED),
            // The program's TCP rules refused it: named at the end with what allows it.
            None => {
                let about = super::describe_addr(addr).unwrap_or_default();
                let cause = crate::policy::report::Cause::Connect;
                super::report::refused_about(cause, std::path::Path::new("/"), about.as_bytes());
            }
        }
    }
    // A socket made here takes the program's place once connected, or under way (a
    // non-blocking socket's EINPROGRESS: it carries on as the program's).
    if let Some(cloexec) = replace.filter(|_| done == 0 || done == i64::from(libc::EINPROGRESS)) {
        if let Err(e) = listener.replace_fd(call.id, call.args[0] as u32, &fd, cloexec) {
            return Some(Answer::Done(errno(&e)));
        }
    }
    Some(Answer::Done(-done))
}

/// Connect `fd` to `addr`, and wait until it is connected: 0, or the errno. The waker ends
/// each wait now and then: the program's call no longer waiting ends it (`None`), a signal
/// waiting for the program answers "restart" (`ERESTARTSYS`: the kernel's own connect
/// answers so, and the connection goes on), else the wait goes on.
fn wait_connected(
    listener: &Listener,
    call: &Call,
    fd: &OwnedFd,
    addr: &[u8],
    killable: bool,
) -> Option<i64> {
    if let Err(e) = crate::sys::socket::connect_bytes(fd.as_fd(), addr) {
        let e = -errno(&e);
        if e != i64::from(libc::EINTR) {
            return Some(e);
        }
    } else {
        return Some(0);
    }
    loop {
        if !listener.still_waiting(call.id) {
            return None;
        }
        if killable && signalled(call.pid) {
            return Some(ERESTARTSYS);
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        // The waker ends the wait now and then (EINTR).
        if nix::poll::poll(&mut fds, PollTimeout::NONE) == Ok(1) {
            return Some(match socket_error(fd) {
                Ok(()) => 0,
                Err(e) => -errno(&e),
            });
        }
    }
}

/// The outcome of a connection that was under way (`SO_ERROR`).
fn socket_error(fd: &OwnedFd) -> io::Result<()> {
    match crate::sys::socket::int_option(fd.as_fd(), libc::SO_ERROR)? {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}
