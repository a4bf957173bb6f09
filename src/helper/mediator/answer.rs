//! The mediated calls other than those that make names (Linux), answered by the guard's
//! listening thread (`create::listen`): reading what the program passed from its memory,
//! opening what it named through its own descriptors (`/proc/PID/cwd`, `pidfd_getfd`),
//! checking the object, and acting on it or refusing; and the seccomp plumbing both share.
//! That thread runs with its effective capabilities dropped, so a root session's calls are
//! checked by the kernel as the program's would be.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::connecting::{Like, Socket};
use super::metadata::{describe, metadata};
use super::notify::{errno, Answer, Caller, Reply, EPERM};
use super::threads::Threads;
use super::{in_session, Scope};
use crate::sandbox::mediated::{syscall_name, IOPRIO_WHO_USER, PRIO_USER};
use crate::sys::at::open_path;

pub(super) fn answer(
    c: &Caller<'_>,
    threads: &mut Threads,
    rules: &Scope,
    supervisor: u32,
) -> Reply {
    let call = c.call;
    let Some(name) = syscall_name(call.nr) else {
        return Reply::Answer(EPERM);
    };
    let a = call.args;
    // Ints the kernel reads from the low 32 bits.
    let int = |i: usize| a[i] as u32 as i32;
    match name {
        "setpriority" | "ioprio_set" => {
            let user = if name == "setpriority" {
                PRIO_USER
            } else {
                IOPRIO_WHO_USER
            };
            let (which, who) = (int(0) as u32, int(1) as u32);
            let group = if name == "setpriority" { 1 } else { 2 };
            let ok = match which {
                w if w == user => false,
                w if w == group => group_in_session(who, supervisor),
                _ => in_session(who, supervisor, &parent_of),
            };
            Reply::Answer(if ok { Answer::Continue } else { EPERM })
        }
        "prlimit64" | "sched_setaffinity" | "sched_setscheduler" | "sched_setparam"
        | "sched_setattr" => Reply::Answer(if in_session(int(0) as u32, supervisor, &parent_of) {
            Answer::Continue
        } else {
            EPERM
        }),
        "ioctl" => pty_peer(c, threads),
        "connect" => Reply::Answer(connect_call(c, threads, rules)),
        "bind" => Reply::Answer(bind_call(c, threads)),
        _ => match metadata(c, threads, name, rules) {
            Ok(reply) => reply,
            Err(e) => Reply::Answer(Answer::Done(errno(&e))),
        },
    }
}

/// A process's parent, from /proc; `None` when it is gone. Threads count as their process.
pub(super) fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let tgid = field("Tgid:")?;
    if tgid != pid {
        // A thread: its process's parent.
        return parent_of(tgid);
    }
    field("PPid:")
}

/// Whether every process of group `pgid` is in the session (and there is one).
fn group_in_session(pgid: u32, supervisor: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let mut found = false;
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp.
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|g| g.parse::<u32>().ok());
        if pgrp == Some(pgid) {
            if !in_session(pid, supervisor, &parent_of) {
                return false;
            }
            found = true;
        }
    }
    found
}

/// TIOCGPTPEER: open the peer of the caller's pty master and hand it over — from the master
/// itself where this machine lets the guard copy the caller's descriptors, else by its pty's
/// number (`peer_by_index`).
fn pty_peer(c: &Caller<'_>, threads: &Threads) -> Reply {
    let call = c.call;
    let run = || -> io::Result<Reply> {
        let known = threads.known(call.pid)?;
        let fd = call.args[0] as u32;
        let asked = call.args[2] as u32 as i32;
        let flags =
            (asked & (libc::O_ACCMODE | libc::O_NONBLOCK)) | libc::O_NOCTTY | libc::O_CLOEXEC;
        let peer = if c.copy_fds {
            let master = known.their_file(fd)?;
            match crate::sys::files::pty_peer(master.as_fd(), flags) {
                Ok(peer) => peer,
                Err(e) => return Ok(Reply::Answer(Answer::Done(errno(&e)))),
            }
        } else {
            match peer_by_index(call.pid, fd, flags)? {
                Some(peer) => peer,
                None => return Ok(Reply::Answer(Answer::Done(-i64::from(libc::ENOTTY)))),
            }
        };
        Ok(Reply::Fd(peer, asked & libc::O_CLOEXEC != 0))
    };
    run().unwrap_or_else(|e| Reply::Answer(Answer::Done(errno(&e))))
}

/// The peer of the pty whose master the caller has as descriptor `fd`, where the guard may
/// not copy it (a container's profile refuses `pidfd_getfd`): the master's number (its
/// `tty-index` in `/proc/TID/fdinfo`), that pty's `/dev/pts/N` opened, and the number read
/// again — both held at once, the master and this peer are of the same pty (a number names
/// one pty while either end is open), so the program never gets another's terminal.
/// `None`: the descriptor is no pty master.
fn peer_by_index(tid: u32, fd: u32, flags: i32) -> io::Result<Option<OwnedFd>> {
    let index = || -> Option<u32> {
        let text = std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("tty-index:"))
            .and_then(|v| v.trim().parse().ok())
    };
    let Some(n) = index() else {
        return Ok(None);
    };
    let path = CString::new(format!("/dev/pts/{n}"))?;
    let peer = crate::sys::at::openat(crate::sys::at::CWD, &path, flags, 0)
        .map_err(io::Error::from_raw_os_error)?;
    if index() != Some(n) {
        return Err(io::Error::from_raw_os_error(libc::EIO));
    }
    Ok(Some(peer))
}

/// `connect`: never let through as asked — the kernel would take the descriptor and the
/// address again, after another thread could have put a unix socket at that number and a
/// host socket's path in that memory. A unix socket is connected here, to the socket file
/// the address names (resolved once, from the caller's working directory, every symlink
/// followed as the kernel follows them, and held open), when that file lies where the
/// program may make names — its own sockets, never the host's; abstract addresses are
/// refused. A socket of another family is connected by a thread restricted by the
/// program's own TCP rules (`connecting`), which the kernel then judges. A full
/// listener's backlog blocks this thread as it would block the caller.
fn connect_call(c: &Caller<'_>, threads: &mut Threads, rules: &Scope) -> Answer {
    let call = c.call;
    let mut run = || -> io::Result<Answer> {
        let (socket, family) = program_socket(c, threads)?;
        let max = std::mem::size_of::<libc::sockaddr_storage>();
        let len = (call.args[2] as u32 as usize).min(max);
        let addr = threads.known(call.pid)?.read(call.args[1], len)?;
        if family != libc::AF_UNIX {
            if c.net.own_network {
                // Where nothing leads out: one to another machine is named at the end.
                super::connecting::observe(threads, call);
            }
            // To a server of the program's own on loopback (`bind_call`), or to a host
            // service the allow-list names: that port too.
            let loopback_port = super::loopback_port(&addr)
                .filter(|p| rules.services.contains(p) || own_ports(|own| own.contains(p)));
            let net = super::NetRules {
                loopback_port,
                ..c.net
            };
            return Ok(super::connecting::start(
                c.listener, call, socket, addr, net, c.killable,
            ));
        }
        let Some(path) = unix_path(&addr) else {
            return Ok(Answer::Done(-i64::from(libc::EINVAL)));
        };
        if path.is_empty() {
            // Abstract: no file to judge it by.
            return Ok(EPERM);
        }
        if let Some(name) = rules
            .lookups
            .as_deref()
            .filter(|_| crate::netproxy::lookups::NAME_SERVICE_SOCKETS.contains(&path))
        {
            return Ok(connect(c, socket, &To::Abstract(name)));
        }
        let object = if path.first() == Some(&b'/') {
            let path = super::paths::as_caller(path, call.pid).into_owned();
            open_path(crate::sys::at::CWD, &CString::new(path)?)?
        } else {
            let cwd = threads.cwd(c.listener, call)?;
            open_path(cwd.fd.as_fd(), &CString::new(path)?)?
        };
        let (real, links, _) = describe(&object, None)?;
        let st = crate::sys::at::fstat(object.as_fd()).map_err(io::Error::from_raw_os_error)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Ok(Answer::Done(-i64::from(libc::ECONNREFUSED)));
        }
        if !rules.may_change(&real, links) && !rules.sockets.contains(&real) {
            super::report::refused(crate::policy::report::Cause::Socket, &real);
            return Ok(Answer::Done(-i64::from(libc::EACCES)));
        }
        Ok(connect(c, socket, &To::Object(&object)))
    };
    run().unwrap_or_else(|e| Answer::Done(errno(&e)))
}

/// The loopback ports where the program's own servers listen (`bind_call`), which its
/// connects to loopback may reach (the host's other loopback ports stay closed).
fn own_ports<T>(f: impl FnOnce(&mut std::collections::BTreeSet<u16>) -> T) -> T {
    use std::sync::Mutex;
    static OWN: Mutex<std::collections::BTreeSet<u16>> =
        Mutex::new(std::collections::BTreeSet::new());
    f(&mut OWN.lock().unwrap_or_else(|p| p.into_inner()))
}

/// A TCP `bind` where the program's TCP is restricted (Landlock alone, no full network):
/// done here, on the program's socket, at the loopback address `loopback_bind` gives —
/// a server the program starts listens for this machine only, and its port is one the
/// program's own connects may reach. Another address is refused (EACCES); any other bind
/// (a unix socket's, judged by Landlock; TCP with the full network) goes on as asked.
fn bind_call(c: &Caller<'_>, threads: &mut Threads) -> Answer {
    let call = c.call;
    if !c.net.deny_tcp {
        return Answer::Continue;
    }
    let run = || -> io::Result<Answer> {
        let max = std::mem::size_of::<libc::sockaddr_storage>();
        let len = (call.args[2] as u32 as usize).min(max);
        let addr = threads.known(call.pid)?.read(call.args[1], len)?;
        let family = addr
            .get(..2)
            .map(|f| i32::from(u16::from_ne_bytes([f[0], f[1]])));
        if !matches!(family, Some(libc::AF_INET | libc::AF_INET6)) {
            return Ok(Answer::Continue);
        }
        let Some(addr) = super::loopback_bind(&addr) else {
            let about = super::describe_addr(&addr).unwrap_or_default();
            let cause = crate::policy::report::Cause::Server;
            super::report::refused_about(cause, std::path::Path::new("/"), about.as_bytes());
            return Ok(Answer::Done(-i64::from(libc::EACCES)));
        };
        let (socket, _) = program_socket(c, threads)?;
        let (fd, replace) = match socket {
            Socket::Copied(fd) => (fd, None),
            Socket::Like(like) => {
                let fd = like.make()?;
                // A server sets it before it binds; the one made here cannot carry the
                // program's over.
                let _ = crate::sys::socket::reuse_address(fd.as_fd());
                (fd, Some(like.cloexec))
            }
        };
        if let Err(e) = crate::sys::socket::bind_bytes(fd.as_fd(), &addr) {
            return Ok(Answer::Done(errno(&e)));
        }
        if let Some(cloexec) = replace {
            c.listener
                .replace_fd(call.id, call.args[0] as u32, &fd, cloexec)?;
        }
        if let Some(port) = bound_port(&fd) {
            own_ports(|own| own.insert(port));
        }
        Ok(Answer::Done(0))
    };
    run().unwrap_or_else(|e| Answer::Done(errno(&e)))
}

/// The port a socket is bound to.
fn bound_port(fd: &OwnedFd) -> Option<u16> {
    let bytes = crate::sys::socket::local_address(fd.as_fd()).ok()?;
    super::loopback_port(&bytes)
}

/// The caller's socket a `connect` names, and its family: the very socket where this
/// machine lets the guard copy it, else what it is, read from `/proc` (a unix socket's
/// type from the kernel's list of them, another's from its protocol's name, its flags
/// from `fdinfo`), to make one like it.
fn program_socket(c: &Caller<'_>, threads: &Threads) -> io::Result<(Socket, i32)> {
    let known = threads.known(c.call.pid)?;
    let fd = c.call.args[0] as u32;
    if c.copy_fds {
        let socket = known.their_file(fd)?;
        let family = crate::sys::socket::int_option(socket.as_fd(), libc::SO_DOMAIN)?;
        return Ok((Socket::Copied(socket), family));
    }
    let tid = c.call.pid;
    let link = std::fs::read_link(format!("/proc/{tid}/fd/{fd}"))?;
    let inode = link
        .to_str()
        .and_then(|l| {
            l.strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse::<u64>()
                .ok()
        })
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOTSOCK))?;
    let unix = std::fs::read_to_string(format!("/proc/{tid}/net/unix"))?;
    let (family, kind, protocol) = match crate::host::sockets::unix_socket_type(&unix, inode) {
        Some(kind) => (libc::AF_UNIX, kind, 0),
        // Every unix socket is in that list; others are named by their protocol.
        None => protocol_name(&format!("/proc/{tid}/fd/{fd}"))
            .and_then(|name| crate::host::sockets::inet_socket_kind(&name))
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP))?,
    };
    let info = std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}"))?;
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|v| i32::from_str_radix(v.trim(), 8).ok())
        .unwrap_or(0);
    let like = Socket::Like(Like {
        family,
        kind,
        protocol,
        nonblock: flags & libc::O_NONBLOCK != 0,
        cloexec: flags & libc::O_CLOEXEC != 0,
    });
    Ok((like, family))
}

/// The name of the protocol the socket at `path` (a descriptor's magic link) was made with
/// (its `system.sockprotoname`: "TCP", "UDPv6", "UNIX-STREAM" …), which the kernel gives
/// whoever may follow the link: no copy of the socket is needed.
fn protocol_name(path: &str) -> Option<Vec<u8>> {
    crate::sys::socket::protocol_name(&CString::new(path).ok()?)
}

/// Where a unix socket is connected to: the socket file the guard resolved and holds, or
/// one of sbx-shell's abstract sockets.
enum To<'a> {
    Object(&'a OwnedFd),
    Abstract(&'a str),
}

/// Connect the caller's unix `socket` to `to`; the call's answer.
fn connect(c: &Caller<'_>, socket: Socket, to: &To<'_>) -> Answer {
    let connect_to = |socket: &OwnedFd| match to {
        To::Object(object) => connect_through_fd(socket, object),
        To::Abstract(name) => connect_abstract(socket, name),
    };
    let done = match socket {
        Socket::Copied(socket) => connect_to(&socket),
        Socket::Like(like) => like.make().and_then(|own| {
            connect_to(&own)?;
            c.listener
                .replace_fd(c.call.id, c.call.args[0] as u32, &own, like.cloexec)
        }),
    };
    match done {
        Ok(()) => Answer::Done(0),
        Err(e) => Answer::Done(errno(&e)),
    }
}

/// Connect `socket` to the socket file `object` names, through this process's
/// `/proc/self/fd`: never by a path the program could change meanwhile.
fn connect_through_fd(socket: &OwnedFd, object: &OwnedFd) -> io::Result<()> {
    let path = format!("/proc/self/fd/{}", object.as_raw_fd());
    crate::sys::socket::connect_unix(socket.as_fd(), &path)
}

/// Connect `socket` to sbx-shell's abstract socket `name` (the name service,
/// `Scope::lookups`).
fn connect_abstract(socket: &OwnedFd, name: &str) -> io::Result<()> {
    crate::sys::socket::connect_abstract(socket.as_fd(), name)
}

/// The path of a unix socket address (`sockaddr_un` bytes): empty for an abstract one,
/// `None` for another family or no path at all.
fn unix_path(addr: &[u8]) -> Option<&[u8]> {
    let family = u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]);
    if family != libc::AF_UNIX as u16 || addr.len() <= 2 {
        return None;
    }
    let path = &addr[2..];
    if path[0] == 0 {
        return Some(&[]);
    }
    Some(&path[..path.iter().position(|b| *b == 0).unwrap_or(path.len())])
}

#[cfg(test)]
mod tests {
    use super::unix_path;

    fn addr(family: u16, path: &[u8]) -> Vec<u8> {
        [&family.to_ne_bytes()[..], path].concat()
    }

    #[test]
    fn a_unix_address_gives_its_path_up_to_the_nul_or_empty_when_abstract() {
        let unix = libc::AF_UNIX as u16;
        assert_eq!(
            unix_path(&addr(unix, b"/tmp/s\0junk")),
            Some(&b"/tmp/s"[..])
        );
        assert_eq!(unix_path(&addr(unix, b"rel/s")), Some(&b"rel/s"[..]));
        assert_eq!(unix_path(&addr(unix, b"\0abstract")), Some(&b""[..]));
        assert_eq!(unix_path(&addr(unix, b"")), None, "unnamed");
        assert_eq!(unix_path(&addr(libc::AF_INET as u16, b"1234")), None);
        assert_eq!(unix_path(&[1]), None);
    }
}
