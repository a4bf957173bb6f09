//! The program's side of an intercepted connection, as HTTP/1.1 requests: each request's
//! head has the placeholders of the credentials that go to this host replaced by their real
//! values, in header values only (and inside `Authorization: Basic`, where git and others
//! put a token as the password); the body is passed as it is, by its framing
//! (`Content-Length` or chunked), so that the next head is found where it starts. The
//! request line (the URL), the body and the trailers are never rewritten; a placeholder
//! seen in the URL, or one that belongs to another host, is noticed instead. Pure.

use base64ct::{Base64, Encoding};
use memchr::memmem;

use crate::netproxy::request::{head_end, MAX_HEAD};

/// A credential for this connection's host: its placeholder and real value.
pub struct Swap {
    pub name: String,
    pub placeholder: Vec<u8>,
    pub real: Vec<u8>,
}

/// What the rewriter saw that it did not replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Noticed {
    /// The placeholder of a credential that does not go to this host.
    Foreign(String),
    /// A placeholder in the request line (the URL): never replaced.
    InUrl(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkEnd,
    Trailer,
    /// After an upgrade (a WebSocket): bytes as they are, to the end.
    Raw,
}

/// The longest chunk-size or trailer line read.
const MAX_LINE: usize = 8 * 1024;

pub struct Rewriter {
    own: Vec<Swap>,
    /// The placeholders of the other credentials, by name.
    foreign: Vec<(Vec<u8>, String)>,
    framing: Framing,
    buf: Vec<u8>,
    pub noticed: Vec<Noticed>,
}

impl Rewriter {
    pub fn new(own: Vec<Swap>, foreign: Vec<(Vec<u8>, String)>) -> Rewriter {
        Rewriter {
            own,
            foreign,
            framing: Framing::Head,
            buf: Vec::new(),
            noticed: Vec::new(),
        }
    }

    /// Take `input` from the program; append what goes to the host to `out`. An error
    /// ends the connection (a request that cannot be read safely).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str> {
        if self.framing == Framing::Raw {
            out.extend_from_slice(input);
            return Ok(());
        }
        self.buf.extend_from_slice(input);
        while self.step(out)? {}
        Ok(())
    }

    /// One step of the framing; whether another may follow.
    fn step(&mut self, out: &mut Vec<u8>) -> Result<bool, &'static str> {
        match self.framing {
            Framing::Head => {
                let Some(end) = head_end(&self.buf) else {
                    return match self.buf.len() > MAX_HEAD {
                        true => Err("a request head too long"),
                        false => Ok(false),
                    };
                };
                let head: Vec<u8> = self.buf.drain(..end).collect();
                self.framing = self.rewrite_head(&head, out)?;
                Ok(true)
            }
            Framing::Length(left) | Framing::ChunkData(left) => {
                if self.buf.is_empty() {
                    return Ok(false);
                }
                let take = usize::try_from(left)
                    .unwrap_or(usize::MAX)
                    .min(self.buf.len());
                out.extend(self.buf.drain(..take));
                let left = left - take as u64;
                self.framing = match (self.framing, left) {
                    (Framing::Length(_), 0) => Framing::Head,
                    (Framing::Length(_), n) => Framing::Length(n),
                    (_, 0) => Framing::ChunkEnd,
                    (_, n) => Framing::ChunkData(n),
                };
                Ok(true)
            }
            Framing::ChunkEnd => {
                let Some(end) = self.buf.get(..2) else {
                    return Ok(false);
                };
                if end != b"\r\n" {
                    return Err("a chunk not ended by CRLF");
                }
                out.extend(self.buf.drain(..2));
                self.framing = Framing::ChunkSize;
                Ok(true)
            }
            Framing::ChunkSize | Framing::Trailer => {
                let Some(at) = memmem::find(&self.buf, b"\r\n") else {
                    return match self.buf.len() > MAX_LINE {
                        true => Err("a chunk line too long"),
                        false => Ok(false),
                    };
                };
                let line: Vec<u8> = self.buf.drain(..at + 2).collect();
                self.framing = match self.framing {
                    Framing::Trailer if at == 0 => Framing::Head,
                    Framing::Trailer => Framing::Trailer,
                    _ => match chunk_size(&line[..at])? {
                        0 => Framing::Trailer,
                        n => Framing::ChunkData(n),
                    },
                };
                out.extend_from_slice(&line);
                Ok(true)
            }
            Framing::Raw => {
                out.append(&mut self.buf);
                Ok(false)
            }
        }
    }

    /// The head with the placeholders replaced, and how its body is framed.
    fn rewrite_head(&mut self, head: &[u8], out: &mut Vec<u8>) -> Result<Framing, &'static str> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Err("a malformed request head"),
        }
        let (Some(method), Some(path), Some(minor)) =
            (request.method, request.path, request.version)
        else {
            return Err("a malformed request line");
        };
        for name in self.names_in(path.as_bytes()) {
            self.noticed.push(Noticed::InUrl(name));
        }
        out.extend_from_slice(format!("{method} {path} HTTP/1.{minor}\r\n").as_bytes());
        let mut framing = Framing::Length(0);
        let (mut length, mut chunked, mut upgrade) = (None::<u64>, false, false);
        for header in request.headers.iter() {
            let value = self.rewrite_value(header.name, header.value);
            let text = std::str::from_utf8(header.value).unwrap_or("");
            if header.name.eq_ignore_ascii_case("content-length") {
                let n: u64 = text.trim().parse().map_err(|_| "a bad Content-Length")?;
                if length.is_some_and(|l| l != n) {
                    return Err("two different Content-Length headers");
                }
                length = Some(n);
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                let last = text.rsplit(',').next().unwrap_or("").trim();
                if !last.eq_ignore_ascii_case("chunked") {
                    return Err("a Transfer-Encoding that does not end in chunked");
                }
                chunked = true;
            } else if header.name.eq_ignore_ascii_case("upgrade") {
                upgrade = true;
            }
            out.extend_from_slice(header.name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if chunked && length.is_some() {
            return Err("both Content-Length and Transfer-Encoding");
        }
        if let Some(n) = length.filter(|n| *n > 0) {
            framing = Framing::Length(n);
        }
        if chunked {
            framing = Framing::ChunkSize;
        }
        if upgrade || method.eq_ignore_ascii_case("CONNECT") {
            framing = Framing::Raw;
        }
        Ok(framing)
    }

    /// A header's value with this host's placeholders replaced, also inside a Basic
    /// authorization's user:password; another host's placeholders noticed, not replaced.
    fn rewrite_value(&mut self, name: &str, value: &[u8]) -> Vec<u8> {
        for seen in self.foreign_in(value) {
            self.noticed.push(Noticed::Foreign(seen));
        }
        let mut value = self.replace(value);
        if name.eq_ignore_ascii_case("authorization") {
            if let Some(basic) = basic_credentials(&value) {
                for seen in self.foreign_in(&basic) {
                    self.noticed.push(Noticed::Foreign(seen));
                }
                let replaced = self.replace(&basic);
                if replaced != basic {
                    value = format!("Basic {}", Base64::encode_string(&replaced)).into_bytes();
                }
            }
        }
        value
    }

    fn replace(&self, value: &[u8]) -> Vec<u8> {
        let mut value = value.to_vec();
        for swap in &self.own {
            value = replace_all(&value, &swap.placeholder, &swap.real);
        }
        value
    }

    fn foreign_in(&self, value: &[u8]) -> Vec<String> {
        self.foreign
            .iter()
            .filter(|(p, _)| memmem::find(value, p).is_some())
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// The names of the credentials whose placeholders `bytes` holds, this host's or not.
    fn names_in(&self, bytes: &[u8]) -> Vec<String> {
        let own = self.own.iter().map(|s| (&s.placeholder, &s.name));
        let foreign = self.foreign.iter().map(|(p, n)| (p, n));
        own.chain(foreign)
            .filter(|(p, _)| memmem::find(bytes, p).is_some())
            .map(|(_, n)| n.clone())
            .collect()
    }
}

/// `Basic` credentials' decoded `user:password`, if the value is that.
fn basic_credentials(value: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(value).ok()?;
    let (scheme, token) = text.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    Base64::decode_vec(token.trim()).ok()
}

fn replace_all(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = memmem::find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// A chunk-size line's size (extensions after `;` ignored).
fn chunk_size(line: &[u8]) -> Result<u64, &'static str> {
    let text = std::str::from_utf8(line).map_err(|_| "a bad chunk size")?;
    let hex = text.split(';').next().unwrap_or("").trim();
    if hex.is_empty() || hex.len() > 15 {
        return Err("a bad chunk size");
    }
    u64::from_str_radix(hex, 16).map_err(|_| "a bad chunk size")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PH: &str = "ghp_PLACEHOLDERPLACEHOLDER0123456789ab";
    const REAL: &str = "ghp_realrealrealrealrealrealrealrealre";
    const OTHER: &str = "sk-ant-OTHERPLACEHOLDER0123456789";

    fn rewriter() -> Rewriter {
        Rewriter::new(
            vec![Swap {
                name: "GH_TOKEN".into(),
                placeholder: PH.into(),
                real: REAL.into(),
            }],
            vec![(OTHER.into(), "ANTHROPIC_API_KEY".into())],
        )
    }

    fn run(r: &mut Rewriter, input: &[u8], piece: usize) -> String {
        let mut out = Vec::new();
        for part in input.chunks(piece) {
            r.feed(part, &mut out).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn headers_get_the_real_value_and_nothing_else_does() {
        let body = format!("{{\"token\":\"{PH}\"}}");
        let input = format!(
            "POST /x?t={PH} HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: token {PH}\r\nX-Other: {OTHER}\r\nContent-Length: {}\r\n\r\n{body}GET / HTTP/1.1\r\nx-api-key: {PH}\r\n\r\n",
            body.len()
        );
        for piece in [1, 7, 4096] {
            let mut r = rewriter();
            let out = run(&mut r, input.as_bytes(), piece);
            assert!(
                out.contains(&format!("Authorization: token {REAL}\r\n")),
                "{out}"
            );
            assert!(out.contains(&format!("x-api-key: {REAL}\r\n")), "{out}");
            assert!(
                out.contains(&format!("/x?t={PH} ")),
                "the URL is left: {out}"
            );
            assert!(out.contains(&body), "the body is left: {out}");
            assert!(out.contains(&format!("X-Other: {OTHER}")), "{out}");
            assert_eq!(out.matches(REAL).count(), 2, "{out}");
            assert_eq!(
                r.noticed,
                vec![
                    Noticed::InUrl("GH_TOKEN".into()),
                    Noticed::Foreign("ANTHROPIC_API_KEY".into())
                ]
            );
        }
    }

    #[test]
    fn basic_authorization_is_decoded_replaced_and_encoded() {
        let basic = Base64::encode_string(format!("x-access-token:{PH}").as_bytes());
        let input =
            format!("GET /r.git/info/refs HTTP/1.1\r\nAuthorization: Basic {basic}\r\n\r\n");
        let out = run(&mut rewriter(), input.as_bytes(), 4096);
        let want = Base64::encode_string(format!("x-access-token:{REAL}").as_bytes());
        assert!(
            out.contains(&format!("Authorization: Basic {want}\r\n")),
            "{out}"
        );
        let foreign = Base64::encode_string(format!("u:{OTHER}").as_bytes());
        let input = format!("GET / HTTP/1.1\r\nAuthorization: Basic {foreign}\r\n\r\n");
        let mut r = rewriter();
        let out = run(&mut r, input.as_bytes(), 4096);
        assert!(out.contains(&foreign));
        assert_eq!(
            r.noticed,
            vec![Noticed::Foreign("ANTHROPIC_API_KEY".into())]
        );
    }

    #[test]
    fn a_chunked_body_is_passed_and_the_next_head_rewritten() {
        let input = format!(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\n{}\r\n{:x}\r\nAuthorization: token {PH}\r\n\r\n\r\n0\r\nTrailer: {PH}\r\n\r\nGET / HTTP/1.1\r\nAuthorization: token {PH}\r\n\r\n",
            &PH[..5],
            format!("Authorization: token {PH}\r\n\r\n").len()
        );
        for piece in [1, 3, 4096] {
            let out = run(&mut rewriter(), input.as_bytes(), piece);
            assert_eq!(out.matches(REAL).count(), 1, "{out}");
            assert!(
                out.ends_with(&format!("Authorization: token {REAL}\r\n\r\n")),
                "{out}"
            );
            assert!(out.contains(&format!("Trailer: {PH}")), "{out}");
        }
    }

    #[test]
    fn ambiguous_framing_ends_the_connection() {
        for head in [
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            "NOT HTTP\r\n\r\n",
        ] {
            let mut out = Vec::new();
            assert!(
                rewriter().feed(head.as_bytes(), &mut out).is_err(),
                "{head}"
            );
        }
        let mut out = Vec::new();
        let bad_chunk = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert!(rewriter().feed(bad_chunk, &mut out).is_err());
    }

    #[test]
    fn after_an_upgrade_bytes_pass_as_they_are() {
        let input = format!(
            "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n{PH}\r\n\r\n"
        );
        let out = run(&mut rewriter(), input.as_bytes(), 4096);
        assert!(out.ends_with(&format!("{PH}\r\n\r\n")), "{out}");
        assert!(!out.contains(REAL));
    }
}
