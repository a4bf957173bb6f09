//! `sbx-shell __sbx_connect PROXY HOST PORT`: ssh's `ProxyCommand` inside the sandbox.
//! It asks the session's proxy for a tunnel (`CONNECT HOST:PORT`) and then moves bytes
//! between it and its stdin and stdout, so that ssh and git over ssh reach the hosts the
//! allow-list names (`--net allow=github.com:22`) and nothing else. A refusal is said on
//! stderr with the option that allows it; the proxy names it at the end of the session.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::ExitCode;

/// The argument that selects this mode.
pub const CONNECT_ARG: &str = "__sbx_connect";

/// The head of the proxy's answer is at most this long.
const HEAD_MAX: usize = 8 * 1024;

pub fn run(args: &[OsString]) -> ExitCode {
    let strings: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let [proxy, host, port] = strings[..] else {
        eprintln!("sbx-shell: {CONNECT_ARG} takes PROXY HOST PORT (ssh's ProxyCommand, as sbx-shell writes it)");
        return ExitCode::from(2);
    };
    match tunnel(proxy, host, port) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sbx-shell: {e}");
            ExitCode::from(1)
        }
    }
}

/// `host:port` as a request target (an IPv6 address in brackets).
pub fn target(host: &str, port: &str) -> String {
    match host.contains(':') {
        true => format!("[{host}]:{port}"),
        false => format!("{host}:{port}"),
    }
}

fn tunnel(proxy: &str, host: &str, port: &str) -> Result<(), String> {
    let to = target(host, port);
    let mut stream = TcpStream::connect(proxy)
        .map_err(|e| format!("cannot reach the sandbox's proxy at {proxy}: {e}"))?;
    stream
        .write_all(format!("CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n").as_bytes())
        .map_err(|e| format!("the sandbox's proxy: {e}"))?;
    let head = read_head(&mut stream).map_err(|e| format!("the sandbox's proxy: {e}"))?;
    let status = status_of(&head);
    if status != Some(200) {
        let line =
            String::from_utf8_lossy(head.split(|&b| b == b'\r').next().unwrap_or(&[])).into_owned();
        return Err(super::messages::connect_refused(&to, &line));
    }
    let mut up = stream
        .try_clone()
        .map_err(|e| format!("the sandbox's proxy: {e}"))?;
    let uplink = std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut up);
        let _ = up.shutdown(Shutdown::Write);
    });
    let mut out = std::io::stdout().lock();
    let mut buf = [0u8; 32 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out.write_all(&buf[..n]).and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
        }
    }
    drop(uplink);
    Ok(())
}

/// The answer's head, up to its blank line, read a byte at a time (what follows is the
/// tunnel's).
fn read_head(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= HEAD_MAX || stream.read(&mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    Ok(head)
}

fn status_of(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\r').next()?;
    let mut words = line.split(|&b| b == b' ');
    words.next().filter(|v| v.starts_with(b"HTTP/1."))?;
    std::str::from_utf8(words.next()?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_statuses() {
        assert_eq!(target("github.com", "22"), "github.com:22");
        assert_eq!(target("::1", "22"), "[::1]:22");
        assert_eq!(
            status_of(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Some(200)
        );
        assert_eq!(status_of(b"HTTP/1.0 403 Forbidden\r\n\r\n"), Some(403));
        assert_eq!(status_of(b"SSH-2.0-x\r\n"), None);
    }
}
