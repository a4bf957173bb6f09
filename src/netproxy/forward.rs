//! Loopback forwards between the sandbox and the host, each one port as asked:
//!
//! - a **host service** the allow-list names (`localhost:5432`): under bwrap, where the
//!   sandbox has a network of its own, the helper listens on that port of the sandbox's
//!   loopback and hands the listeners over (`serve_services_from_sandbox`); each connection
//!   is passed to the same port of the host's loopback. (Landlock alone and Seatbelt share
//!   the host's loopback: their rules let that port through instead.)
//! - a **published port** (`--publish [HOSTPORT:]PORT`): sbx-shell listens on the host's
//!   loopback and passes each connection to the program's server on PORT — inside the
//!   sandbox's network through a socket the guard makes there (`helper::netsockets`), or,
//!   where the sandbox shares the host's network, on the host's own loopback when the two
//!   ports differ (when they are the same the program's server is there already, as bare).
//!
//! Published ports listen on the host's loopback only: this machine's browser reaches the
//! program's server, other machines do not.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// One `--publish`: the host's loopback port, and the program's port it leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish {
    pub host_port: u16,
    pub port: u16,
}

/// `--publish PORT` or `--publish HOSTPORT:PORT`, as container tools spell it.
pub fn parse_publish(entries: &[String]) -> Result<Vec<Publish>, String> {
    let port = |text: &str| text.parse::<u16>().ok().filter(|p| *p > 0);
    let mut all: Vec<Publish> = Vec::new();
    for entry in entries {
        let parsed = match entry.split_once(':') {
            Some((host, inner)) => port(host).zip(port(inner)),
            None => port(entry).map(|p| (p, p)),
        };
        let Some((host_port, port)) = parsed else {
            return Err(super::messages::publish_spelling(entry));
        };
        if all.iter().any(|p| p.host_port == host_port) {
            let instead = host_port.saturating_add(1);
            return Err(super::messages::published_twice(
                entry, host_port, instead, port,
            ));
        }
        all.push(Publish { host_port, port });
    }
    Ok(all)
}

/// Where a published port's connections go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leads {
    /// The program's port in the sandbox's own network (bwrap).
    Sandbox(u16),
    /// That port of the host's loopback (the sandbox shares the host's network).
    Host(u16),
}

/// What sbx-shell forwards for `publish`: nothing where the sandbox shares the host's
/// network and the ports are the same. Pure.
pub fn leads(publish: Publish, own_network: bool) -> Option<Leads> {
    match (own_network, publish.host_port == publish.port) {
        (true, _) => Some(Leads::Sandbox(publish.port)),
        (false, false) => Some(Leads::Host(publish.port)),
        (false, true) => None,
    }
}

/// The supervisor's end of the guard's socket maker (`helper::netsockets`).
#[derive(Clone)]
pub struct Maker(Arc<Mutex<OwnedFd>>);

impl Maker {
    pub fn new(channel: OwnedFd) -> Maker {
        Maker(Arc::new(Mutex::new(channel)))
    }

    /// A TCP socket of the sandbox's network (`v6`: IPv6), made by the guard.
    fn socket(&self, v6: bool) -> io::Result<OwnedFd> {
        let channel = self.0.lock().map_err(|_| io::Error::other("poisoned"))?;
        let mut stream = std::fs::File::from(channel.try_clone()?);
        stream.write_all(if v6 { b"6" } else { b"4" })?;
        crate::sys::fdpass::receive_fd(&channel)
    }
}

/// Listen on the host's loopback for `publish` (IPv4, and IPv6 where the host has it) and
/// pass each connection on as `leads` says, from threads of their own. Returns at once.
pub fn publish(publish: Publish, leads: Leads, maker: Option<Maker>) -> Result<(), String> {
    let taken = |e: io::Error| {
        let asked = match publish.host_port == publish.port {
            true => publish.port.to_string(),
            false => format!("{}:{}", publish.host_port, publish.port),
        };
        let free = free_port_near(publish.host_port);
        super::messages::publish_taken(&asked, publish.host_port, e, free, publish.port)
    };
    let v4 = TcpListener::bind((Ipv4Addr::LOCALHOST, publish.host_port)).map_err(taken)?;
    let v6 = TcpListener::bind((Ipv6Addr::LOCALHOST, publish.host_port)).ok();
    for listener in std::iter::once(v4).chain(v6) {
        let maker = maker.clone();
        let to = move || match (leads, &maker) {
            (Leads::Sandbox(port), Some(maker)) => into_sandbox(maker, port),
            (Leads::Sandbox(_), None) => Err(io::ErrorKind::NotConnected.into()),
            (Leads::Host(port), _) => on_host(port, false),
        };
        accept_each(listener, "sbx-publish", to).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// A port to suggest in place of `port`: the next one, or one above 1024 for a port only
/// root may listen on. Pure.
fn free_port_near(port: u16) -> u16 {
    match port {
        0..=1023 => port + 8000,
        _ => port.saturating_add(1),
    }
}

/// Serve the host services' listeners the helper sends over `channel` (from inside bwrap's
/// network namespace): each connection goes on to the same port of the host's loopback.
/// Returns at once.
pub fn serve_services_from_sandbox(channel: OwnedFd) -> io::Result<()> {
    crate::sys::process::spawn_quiet("sbx-services", move || {
        while let Ok(fd) = crate::sys::fdpass::receive_fd(&channel) {
            let listener = TcpListener::from(fd);
            let Ok(at) = listener.local_addr() else {
                continue;
            };
            let to = move || on_host(at.port(), at.is_ipv6());
            let _ = accept_each(listener, "sbx-services", to);
        }
    })
}

/// Accept on `listener` until sbx-shell ends; each client joined to what `to` connects.
fn accept_each(
    listener: TcpListener,
    name: &'static str,
    to: impl Fn() -> io::Result<TcpStream> + Send + Sync + 'static,
) -> io::Result<()> {
    let to = Arc::new(to);
    crate::sys::process::spawn_quiet(name, move || {
        for client in listener.incoming() {
            let Ok(client) = client else {
                // Out of fds or memory: wait rather than spin.
                thread::sleep(Duration::from_millis(20));
                continue;
            };
            let to = to.clone();
            let _ = crate::sys::process::spawn_quiet(name, move || {
                // Nothing listens there: the client's connection ends, as a refused one.
                if let Ok(upstream) = to() {
                    let _ = both_ways(client, upstream);
                }
            });
        }
    })
}

/// The program's server on `port` of the sandbox's loopback: IPv4, else IPv6 (a server
/// bound to `localhost` may hold either).
fn into_sandbox(maker: &Maker, port: u16) -> io::Result<TcpStream> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    connect_made(maker.socket(false)?, v4).or_else(|_| connect_made(maker.socket(true)?, v6))
}

/// Connect a socket the guard made to `to`.
fn connect_made(socket: OwnedFd, to: SocketAddr) -> io::Result<TcpStream> {
    let rc = match to {
        SocketAddr::V4(v4) => {
            let addr = nix::sys::socket::SockaddrIn::from(v4);
            nix::sys::socket::connect(socket.as_raw_fd(), &addr)
        }
        SocketAddr::V6(v6) => {
            let addr = nix::sys::socket::SockaddrIn6::from(v6);
            nix::sys::socket::connect(socket.as_raw_fd(), &addr)
        }
    };
    rc?;
    Ok(TcpStream::from(socket))
}

/// `port` of the host's loopback, the family of `v6` first, then the other.
fn on_host(port: u16, v6: bool) -> io::Result<TcpStream> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let v6addr = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    let (first, then) = if v6 { (v6addr, v4) } else { (v4, v6addr) };
    TcpStream::connect(first).or_else(|_| TcpStream::connect(then))
}

/// Move bytes both ways until both sides are done.
pub(super) fn both_ways(mut client: TcpStream, mut upstream: TcpStream) -> io::Result<()> {
    let (mut client_in, mut upstream_out) = (client.try_clone()?, upstream.try_clone()?);
    let uplink = thread::Builder::new()
        .name("sbx-proxy".into())
        .spawn(move || {
            let _ = pump(&mut client_in, &mut upstream_out);
            let _ = upstream_out.shutdown(Shutdown::Write);
        })?;
    let _ = pump(&mut upstream, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = uplink.join();
    Ok(())
}

/// Copy until end of file, in large chunks (io::copy's 8 KiB cost a download half its speed).
fn pump(from: &mut TcpStream, to: &mut TcpStream) -> io::Result<()> {
    let mut buf = vec![0u8; 128 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(buf.get(..n).unwrap_or_default())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_is_spelled_as_container_tools_spell_it() {
        let ok = |e: &[&str]| parse_publish(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            ok(&["5173", "8081:8080"]).unwrap(),
            vec![
                Publish {
                    host_port: 5173,
                    port: 5173
                },
                Publish {
                    host_port: 8081,
                    port: 8080
                }
            ]
        );
        for bad in ["0", "x", "70000", "1:2:3", ":80", "127.0.0.1:80:80"] {
            let err = ok(&[bad]).unwrap_err();
            assert!(err.contains(bad) && err.contains("Hint: "), "{bad}: {err}");
        }
        let err = ok(&["8080", "8080:9090"]).unwrap_err();
        assert!(err.contains("published twice"), "{err}");
    }

    #[test]
    fn a_taken_port_suggests_one_anyone_may_listen_on() {
        assert_eq!(free_port_near(80), 8080);
        assert_eq!(free_port_near(8080), 8081);
        assert_eq!(free_port_near(u16::MAX), u16::MAX);
    }

    #[test]
    fn a_port_is_forwarded_unless_the_program_serves_it_on_the_host_already() {
        let p = |host_port, port| Publish { host_port, port };
        assert_eq!(leads(p(80, 80), true), Some(Leads::Sandbox(80)));
        assert_eq!(leads(p(81, 80), true), Some(Leads::Sandbox(80)));
        assert_eq!(leads(p(81, 80), false), Some(Leads::Host(80)));
        assert_eq!(leads(p(80, 80), false), None);
    }
}
