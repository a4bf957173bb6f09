//! The ssh agent protocol (draft-miller-ssh-agent) as far as the filter reads it: frames,
//! the requests, the identities answer, `session-bind@openssh.com`, and what a signature
//! request asks to sign (an ssh login, an SSHSIG preamble, or something else). Pure.

/// The longest message either side may send (OpenSSH's `AGENT_MAX_LEN`).
pub const MAX_MESSAGE: usize = 256 * 1024;

/// Message numbers.
pub mod code {
    /// Protocol 1's "remove all", which `ssh-add -D` still sends.
    pub const REMOVE_ALL_V1: u8 = 9;
    pub const FAILURE: u8 = 5;
    pub const SUCCESS: u8 = 6;
    pub const REQUEST_IDENTITIES: u8 = 11;
    pub const IDENTITIES_ANSWER: u8 = 12;
    pub const SIGN_REQUEST: u8 = 13;
    pub const ADD_IDENTITY: u8 = 17;
    pub const REMOVE_IDENTITY: u8 = 18;
    pub const REMOVE_ALL_IDENTITIES: u8 = 19;
    pub const ADD_SMARTCARD_KEY: u8 = 20;
    pub const REMOVE_SMARTCARD_KEY: u8 = 21;
    pub const LOCK: u8 = 22;
    pub const UNLOCK: u8 = 23;
    pub const ADD_ID_CONSTRAINED: u8 = 25;
    pub const ADD_SMARTCARD_KEY_CONSTRAINED: u8 = 26;
    pub const EXTENSION: u8 = 27;
    /// `SSH2_MSG_USERAUTH_REQUEST`, inside the data of a login's signature.
    pub const USERAUTH_REQUEST: u8 = 50;
}

/// The extension OpenSSH (8.9 and later) sends before it asks for a login's signature.
pub const SESSION_BIND: &[u8] = b"session-bind@openssh.com";

/// A cursor over the SSH wire encoding (RFC 4251 §5).
pub struct WireReader<'a>(&'a [u8]);

impl<'a> WireReader<'a> {
    pub fn new(bytes: &'a [u8]) -> WireReader<'a> {
        WireReader(bytes)
    }

    pub fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    pub fn u32(&mut self) -> Option<u32> {
        let (head, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*head))
    }

    pub fn string(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.u32()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        Some(s)
    }

    pub fn rest(&self) -> &'a [u8] {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Append `bytes` as an SSH string.
pub fn put_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// A message body with its length in front.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    put_string(&mut out, body);
    out
}

/// One request, borrowed from its message body.
#[derive(Debug, PartialEq, Eq)]
pub enum AgentRequest<'a> {
    Identities,
    Sign {
        key: &'a [u8],
        data: &'a [u8],
        flags: u32,
    },
    Extension {
        name: &'a [u8],
        body: &'a [u8],
    },
    /// Any other message number: adding, removing, locking, and what this filter does
    /// not know.
    Other(u8),
    /// A known number whose body does not parse.
    Malformed(u8),
}

pub fn parse_request(body: &[u8]) -> AgentRequest<'_> {
    let mut r = WireReader::new(body);
    let Some(kind) = r.byte() else {
        return AgentRequest::Malformed(0);
    };
    let parsed = match kind {
        code::REQUEST_IDENTITIES => Some(AgentRequest::Identities),
        code::SIGN_REQUEST => (|| {
            let key = r.string()?;
            let data = r.string()?;
            let flags = r.u32()?;
            r.is_empty()
                .then_some(AgentRequest::Sign { key, data, flags })
        })(),
        code::EXTENSION => r.string().map(|name| AgentRequest::Extension {
            name,
            body: r.rest(),
        }),
        other => return AgentRequest::Other(other),
    };
    parsed.unwrap_or(AgentRequest::Malformed(kind))
}

/// `session-bind@openssh.com`'s body: the server's host key, the session's identifier,
/// the server's signature of it, and whether the connection is for agent forwarding.
#[derive(Debug, PartialEq, Eq)]
pub struct SessionBind<'a> {
    pub host_key: &'a [u8],
    pub session_id: &'a [u8],
    pub signature: &'a [u8],
    pub forwarding: bool,
}

pub fn parse_session_bind(body: &[u8]) -> Option<SessionBind<'_>> {
    let mut r = WireReader::new(body);
    let bind = SessionBind {
        host_key: r.string()?,
        session_id: r.string()?,
        signature: r.string()?,
        forwarding: r.byte()? != 0,
    };
    r.is_empty().then_some(bind)
}

/// The keys of an identities answer: (public key blob, comment).
pub fn parse_identities(body: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut r = WireReader::new(body);
    if r.byte()? != code::IDENTITIES_ANSWER {
        return None;
    }
    let count = r.u32()?;
    let mut keys = Vec::new();
    for _ in 0..count {
        keys.push((r.string()?.to_vec(), r.string()?.to_vec()));
    }
    r.is_empty().then_some(keys)
}

pub fn identities_answer(keys: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![code::IDENTITIES_ANSWER];
    out.extend_from_slice(&(keys.len() as u32).to_be_bytes());
    for (blob, comment) in keys {
        put_string(&mut out, blob);
        put_string(&mut out, comment);
    }
    out
}

/// What a signature request's data is.
#[derive(Debug, PartialEq, Eq)]
pub enum Signed<'a> {
    /// An ssh login (RFC 4252 §7): the session it is for, the user, the key, and with
    /// OpenSSH's `publickey-hostbound-v00@openssh.com` the server's host key.
    Login {
        session_id: &'a [u8],
        user: &'a [u8],
        key: &'a [u8],
        host_key: Option<&'a [u8]>,
    },
    /// An SSHSIG signature (`ssh-keygen -Y sign`), with its namespace (`git` for commits
    /// and tags).
    Sshsig { namespace: &'a [u8] },
    /// Anything else.
    Unknown,
}

pub fn what_is_signed(data: &[u8]) -> Signed<'_> {
    if let Some(rest) = data.strip_prefix(b"SSHSIG") {
        let mut r = WireReader::new(rest);
        let parsed = (|| {
            let namespace = r.string()?;
            let _reserved = r.string()?;
            let _hash_alg = r.string()?;
            let _hash = r.string()?;
            r.is_empty().then_some(Signed::Sshsig { namespace })
        })();
        return parsed.unwrap_or(Signed::Unknown);
    }
    let mut r = WireReader::new(data);
    let parsed = (|| {
        let session_id = r.string()?;
        if r.byte()? != code::USERAUTH_REQUEST {
            return None;
        }
        let user = r.string()?;
        if r.string()? != b"ssh-connection" {
            return None;
        }
        let method = r.string()?;
        if r.byte()? == 0 {
            return None;
        }
        let _alg = r.string()?;
        let key = r.string()?;
        let host_key = match method {
            b"publickey" => None,
            b"publickey-hostbound-v00@openssh.com" => Some(r.string()?),
            _ => return None,
        };
        r.is_empty().then_some(Signed::Login {
            session_id,
            user,
            key,
            host_key,
        })
    })();
    parsed.unwrap_or(Signed::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_string(&mut out, bytes);
        out
    }

    pub(crate) fn login(session: &[u8], key: &[u8], host_key: Option<&[u8]>) -> Vec<u8> {
        let mut d = string(session);
        d.push(code::USERAUTH_REQUEST);
        for s in [&b"git"[..], b"ssh-connection"] {
            d.extend(string(s));
        }
        d.extend(string(match host_key {
            Some(_) => b"publickey-hostbound-v00@openssh.com",
            None => b"publickey",
        }));
        d.push(1);
        d.extend(string(b"ssh-ed25519"));
        d.extend(string(key));
        if let Some(h) = host_key {
            d.extend(string(h));
        }
        d
    }

    #[test]
    fn requests_parse_and_trailing_bytes_are_malformed() {
        assert_eq!(parse_request(&[11]), AgentRequest::Identities);
        let mut sign = vec![13];
        sign.extend(string(b"KEY"));
        sign.extend(string(b"DATA"));
        sign.extend(2u32.to_be_bytes());
        assert_eq!(
            parse_request(&sign),
            AgentRequest::Sign {
                key: b"KEY",
                data: b"DATA",
                flags: 2
            }
        );
        sign.push(0);
        assert_eq!(parse_request(&sign), AgentRequest::Malformed(13));
        assert_eq!(parse_request(&[19]), AgentRequest::Other(19));
        assert_eq!(parse_request(&[]), AgentRequest::Malformed(0));
        let mut ext = vec![27];
        ext.extend(string(SESSION_BIND));
        ext.extend(b"rest");
        assert_eq!(
            parse_request(&ext),
            AgentRequest::Extension {
                name: SESSION_BIND,
                body: b"rest"
            }
        );
    }

    #[test]
    fn a_string_longer_than_the_message_is_refused() {
        let mut r = WireReader::new(&[0, 0, 0, 9, 1, 2]);
        assert_eq!(r.string(), None);
    }

    #[test]
    fn session_bind_and_identities_round_trip() {
        let mut body = string(b"HOSTKEY");
        body.extend(string(b"SID"));
        body.extend(string(b"SIG"));
        body.push(1);
        assert_eq!(
            parse_session_bind(&body),
            Some(SessionBind {
                host_key: b"HOSTKEY",
                session_id: b"SID",
                signature: b"SIG",
                forwarding: true
            })
        );
        body.push(0);
        assert_eq!(parse_session_bind(&body), None);
        let keys = vec![
            (b"A".to_vec(), b"a@x".to_vec()),
            (b"B".to_vec(), Vec::new()),
        ];
        assert_eq!(parse_identities(&identities_answer(&keys)), Some(keys));
        assert_eq!(parse_identities(&[5]), None);
    }

    #[test]
    fn signed_data_is_told_apart() {
        assert_eq!(
            what_is_signed(&login(b"S", b"K", None)),
            Signed::Login {
                session_id: b"S",
                user: b"git",
                key: b"K",
                host_key: None
            }
        );
        assert!(matches!(
            what_is_signed(&login(b"S", b"K", Some(b"H"))),
            Signed::Login {
                host_key: Some(b"H"),
                ..
            }
        ));
        let mut sig = b"SSHSIG".to_vec();
        for s in [&b"git"[..], b"", b"sha512", b"HASH"] {
            sig.extend(string(s));
        }
        assert_eq!(what_is_signed(&sig), Signed::Sshsig { namespace: b"git" });
        sig.push(0);
        assert_eq!(what_is_signed(&sig), Signed::Unknown);
        assert_eq!(what_is_signed(b"anything at all"), Signed::Unknown);
        let mut truncated = login(b"S", b"K", None);
        truncated.pop();
        assert_eq!(what_is_signed(&truncated), Signed::Unknown);
    }
}
