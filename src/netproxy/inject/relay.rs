//! One intercepted connection: TLS with the program (the session's certificate for the
//! host), TLS with the real host (its certificate verified), and between them the
//! program's requests through the `Rewriter` and the host's answers as they are. One
//! thread, both sockets non-blocking under `poll`: each side's plaintext is read only
//! while the other side has taken what came before (bounded buffers both ways).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection};

use super::rewrite::Rewriter;

/// The most plaintext held for a side that has not taken it yet.
const HELD: usize = 256 * 1024;

/// How long the host may stay silent after the program is done with the connection.
const LINGER: Duration = Duration::from_secs(30);
const LINGER_MS: u16 = 30_000;

/// The connection's two sockets and what the program sent after its `CONNECT` head.
pub struct Ends {
    pub client: TcpStream,
    pub upstream: TcpStream,
    pub early: Vec<u8>,
}

/// A side's plaintext, read from its TLS connection.
enum Plain {
    Data(usize),
    Nothing,
    End,
}

fn read_plain(conn: &mut impl Read, buf: &mut [u8]) -> Plain {
    match conn.read(buf) {
        Ok(0) => Plain::End,
        Ok(n) => Plain::Data(n),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Plain::Nothing,
        Err(_) => Plain::End,
    }
}

/// Write what TLS has for `socket` until the socket would block; whether anything went.
fn flush(conn: &mut rustls::Connection, socket: &mut TcpStream) -> io::Result<bool> {
    let mut wrote = false;
    while conn.wants_write() {
        match conn.write_tls(socket) {
            Ok(n) => wrote |= n > 0,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(wrote),
            Err(e) => return Err(e),
        }
    }
    Ok(wrote)
}

/// Read what `socket` has into TLS while TLS has room for it (its plaintext not yet taken
/// is bounded); whether the socket is at its end.
fn fill(conn: &mut rustls::Connection, socket: &mut impl Read) -> Result<bool, String> {
    loop {
        if !conn.wants_read() {
            return Ok(false);
        }
        match conn.read_tls(socket) {
            Ok(0) => return Ok(true),
            Ok(_) => {
                conn.process_new_packets().map_err(|e| e.to_string())?;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// How long the real host may take to complete its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(15);

/// TLS with the real host at `upstream`, its certificate verified for `host`: done before
/// the program's `CONNECT` is answered, so that a host that fails is the answer's `502`.
pub fn open(
    upstream: &mut TcpStream,
    config: Arc<ClientConfig>,
    host: &str,
) -> Result<rustls::Connection, String> {
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host}: {e}"))?;
    let mut outer: rustls::Connection = ClientConnection::new(config, name)
        .map_err(|e| e.to_string())?
        .into();
    let timeouts = |socket: &TcpStream, t| {
        socket
            .set_read_timeout(t)
            .and_then(|()| socket.set_write_timeout(t))
    };
    timeouts(upstream, Some(HANDSHAKE)).map_err(|e| e.to_string())?;
    while outer.is_handshaking() {
        outer
            .complete_io(upstream)
            .map_err(|e| format!("{host}: {e}"))?;
    }
    timeouts(upstream, None).map_err(|e| e.to_string())?;
    Ok(outer)
}

/// Serve one connection to `host` until both sides are done (`outer`: `open`'s). The
/// error names the side that failed (for the network log).
pub fn relay(
    mut ends: Ends,
    inner: Arc<ServerConfig>,
    mut outer: rustls::Connection,
    host: &str,
    rewriter: &mut Rewriter,
) -> Result<(), String> {
    let mut inner: rustls::Connection = ServerConnection::new(inner)
        .map_err(|e| e.to_string())?
        .into();
    if !ends.early.is_empty() {
        let early = std::mem::take(&mut ends.early);
        fill(&mut inner, &mut &early[..]).map_err(|e| format!("the program's TLS: {e}"))?;
    }
    ends.client
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    ends.upstream
        .set_nonblocking(true)
        .map_err(|e| e.to_string())?;
    let mut state = Flow::default();
    let result = state.run(&mut ends, &mut inner, &mut outer, host, rewriter);
    if let Err(e) = &result {
        if e.starts_with(host) && !state.answered && !inner.is_handshaking() {
            let why = format!("sbx-shell: {e}\n");
            let answer = format!(
                "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{why}",
                why.len()
            );
            let _ = inner.writer().write_all(answer.as_bytes());
            inner.send_close_notify();
            let _ = ends.client.set_nonblocking(false);
            let _ = flush(&mut inner, &mut ends.client);
        }
    }
    result
}

#[derive(Default)]
struct Flow {
    up: Vec<u8>,
    down: Vec<u8>,
    client_done: bool,
    upstream_done: bool,
    client_eof: bool,
    upstream_eof: bool,
    closed_up: bool,
    closed_down: bool,
    /// Some of the host's answer reached the program.
    answered: bool,
}

impl Flow {
    fn run(
        &mut self,
        ends: &mut Ends,
        inner: &mut rustls::Connection,
        outer: &mut rustls::Connection,
        host: &str,
        rewriter: &mut Rewriter,
    ) -> Result<(), String> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut done_since: Option<std::time::Instant> = None;
        loop {
            // Plaintext moves while TLS has room, and a flush makes room: both until neither
            // does, so that `poll` waits only for what the sockets must bring (a flush
            // that made room for the rest of a download once stalled it for good).
            loop {
                let moved = self.move_plain(inner, outer, rewriter, &mut buf)?;
                let to_client =
                    flush(inner, &mut ends.client).map_err(|e| format!("the program: {e}"))?;
                let to_host =
                    flush(outer, &mut ends.upstream).map_err(|e| format!("{host}: {e}"))?;
                if !(moved || to_client || to_host) {
                    break;
                }
            }
            if self.closed_down && !inner.wants_write() {
                return Ok(());
            }
            let client_flags = interest(!self.client_eof && self.up.len() < HELD, inner);
            let upstream_flags = interest(!self.upstream_eof && self.down.len() < HELD, outer);

            if client_flags.is_empty() && upstream_flags.is_empty() {
                return Ok(());
            }
            let mut fds = [
                PollFd::new(ends.client.as_fd(), client_flags),
                PollFd::new(ends.upstream.as_fd(), upstream_flags),
            ];
            if self.client_done && done_since.is_none() {
                done_since = Some(std::time::Instant::now());
            }
            let timeout = match done_since {
                Some(_) => PollTimeout::from(LINGER_MS),
                None => PollTimeout::NONE,
            };
            match nix::poll::poll(&mut fds, timeout) {
                Ok(0) if done_since.is_some_and(|t| t.elapsed() >= LINGER) => return Ok(()),
                Ok(0) => continue,
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.to_string()),
            }
            let ready = |fd: &PollFd| {
                fd.revents().is_some_and(|r| {
                    r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR)
                })
            };
            let (client_ready, upstream_ready) = (ready(&fds[0]), ready(&fds[1]));
            if client_ready && !self.client_eof {
                self.client_eof =
                    fill(inner, &mut ends.client).map_err(|e| format!("the program's TLS: {e}"))?;
            }
            if upstream_ready && !self.upstream_eof {
                self.upstream_eof =
                    fill(outer, &mut ends.upstream).map_err(|e| format!("{host}: {e}"))?;
            }
        }
    }

    /// Move plaintext each way as far as it goes now; whether anything moved.
    fn move_plain(
        &mut self,
        inner: &mut rustls::Connection,
        outer: &mut rustls::Connection,
        rewriter: &mut Rewriter,
        buf: &mut [u8],
    ) -> Result<bool, String> {
        let mut moved = false;
        if self.up.len() < HELD && !self.client_done {
            match read_plain(&mut inner.reader(), buf) {
                Plain::Data(n) => {
                    rewriter
                        .feed(&buf[..n], &mut self.up)
                        .map_err(|why| format!("the program sent {why}"))?;
                    moved = true;
                }
                Plain::End => self.client_done = true,
                Plain::Nothing => {}
            }
        }
        if !self.up.is_empty() {
            let n = outer.writer().write(&self.up).map_err(|e| e.to_string())?;
            self.up.drain(..n);
            moved |= n > 0;
        }
        if self.down.len() < HELD && !self.upstream_done {
            match read_plain(&mut outer.reader(), buf) {
                Plain::Data(n) => {
                    self.down.extend_from_slice(&buf[..n]);
                    moved = true;
                }
                Plain::End => self.upstream_done = true,
                Plain::Nothing => {}
            }
        }
        if !self.down.is_empty() {
            let n = inner
                .writer()
                .write(&self.down)
                .map_err(|e| e.to_string())?;
            self.down.drain(..n);
            self.answered |= n > 0;
            moved |= n > 0;
        }
        if self.client_done && self.up.is_empty() && !self.closed_up {
            outer.send_close_notify();
            self.closed_up = true;
        }
        if self.upstream_done && self.down.is_empty() && !self.closed_down {
            inner.send_close_notify();
            self.closed_down = true;
        }
        Ok(moved)
    }
}

fn interest(read: bool, conn: &rustls::Connection) -> PollFlags {
    let mut flags = PollFlags::empty();
    if read && conn.wants_read() {
        flags |= PollFlags::POLLIN;
    }
    if conn.wants_write() {
        flags |= PollFlags::POLLOUT;
    }
    flags
}
