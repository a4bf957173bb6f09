//! The filter's decisions: which keys the program sees, which signatures it gets, which
//! connections are bound to which host. Pure (the host signature is checked here too, by
//! arithmetic alone).
//!
//! The rule, whole: a key is listed and used only when the policy names it. A signature
//! is made only for (a) an ssh login on a connection the client bound
//! (`session-bind@openssh.com`) to a host key that `known_hosts` lists for a host the key
//! may log in to — or for any host when the policy names none — or (b) a git signature
//! (`ssh-keygen -Y sign -n git`) when the policy allows signing. Everything else is
//! refused and named: other data, other namespaces, a connection forwarded to another
//! machine, adding, removing or locking keys, every extension but `session-bind`.

use crate::policy::refusal::{Kind, Refusal};

use super::wire::{self, SessionBind, Signed};

/// A key the policy names, with what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub blob: Vec<u8>,
    /// `SHA256:…`, as `ssh-add -l` shows it.
    pub fingerprint: String,
    /// The hosts it may log in to, as the policy names them; empty: any host.
    pub hosts: Vec<String>,
    /// The host keys `known_hosts` lists for those hosts.
    pub host_keys: Vec<Vec<u8>>,
}

/// What the filter allows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentRules {
    pub keys: Vec<Key>,
    pub sign_commits: bool,
    pub confirm: bool,
    /// Host keys found in `known_hosts`, with the names listed in plain for them: to say
    /// which host a refused login was for.
    pub known: Vec<(Vec<u8>, Vec<String>)>,
}

/// One connection to the filter: the sessions its client bound, and whether it is an
/// agent forwarded to another machine.
#[derive(Debug, Default)]
pub struct Connection {
    binds: Vec<(Vec<u8>, Vec<u8>)>,
    forwarding: bool,
}

/// At most this many sessions are remembered per connection (OpenSSH keeps 16).
const BINDS: usize = 16;

/// What to do with a signature request.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Pass it to the user's agent; `what` says what is signed (for a confirmation).
    Sign {
        what: String,
    },
    Refuse(Refusal),
}

impl AgentRules {
    pub fn key(&self, blob: &[u8]) -> Option<&Key> {
        self.keys.iter().find(|k| k.blob == blob)
    }

    /// The user's agent's identities that the program may see.
    pub fn listed(&self, all: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
        all.into_iter()
            .filter(|(b, _)| self.key(b).is_some())
            .collect()
    }

    /// How a host key is named: its plain names in `known_hosts`, else its fingerprint.
    fn host_name(&self, host_key: &[u8]) -> String {
        self.known
            .iter()
            .find(|(k, _)| k == host_key)
            .and_then(|(_, names)| names.first().cloned())
            .unwrap_or_else(|| format!("the host with key {}", fingerprint(host_key)))
    }

    pub fn judge_sign(&self, conn: &Connection, key: &[u8], data: &[u8]) -> Verdict {
        let Some(allowed) = self.key(key) else {
            let fp = fingerprint(key);
            return refuse(
                &fp,
                "a key the policy does not name",
                Some(format!("--ssh-key {fp}")),
            );
        };
        let fp = &allowed.fingerprint;
        if conn.forwarding {
            return refuse(
                &format!("{fp} through agent forwarding"),
                "a signature asked from another machine (ssh -A)",
                None,
            );
        }
        match wire::what_is_signed(data) {
            Signed::Login {
                session_id,
                key: login_key,
                host_key,
                user,
            } => {
                if login_key != key {
                    return refuse(fp, "a login for another key than the one signing", None);
                }
                self.judge_login(conn, allowed, session_id, host_key, user)
            }
            Signed::Sshsig { namespace: b"git" } if self.sign_commits => Verdict::Sign {
                what: format!("sign a git commit or tag with {fp}"),
            },
            Signed::Sshsig { namespace: b"git" } => refuse(
                &format!("git signature with {fp}"),
                "signing commits is off",
                Some("--ssh-sign-commits".into()),
            ),
            Signed::Sshsig { namespace } => refuse(
                &format!(
                    "signature in namespace {} with {fp}",
                    String::from_utf8_lossy(namespace)
                ),
                "only git signatures are made (namespace git)",
                None,
            ),
            Signed::Unknown => refuse(
                &format!("signature of other data with {fp}"),
                "neither an ssh login nor a git signature",
                None,
            ),
        }
    }

    /// A login's signature: for a session the client bound to a host this key may log in
    /// to; unbound only when the key may log in anywhere and the connection bound nothing.
    fn judge_login(
        &self,
        conn: &Connection,
        allowed: &Key,
        session_id: &[u8],
        host_key: Option<&[u8]>,
        user: &[u8],
    ) -> Verdict {
        let fp = &allowed.fingerprint;
        let Some((bound, _)) = conn.binds.iter().find(|(_, s)| s == session_id) else {
            if allowed.hosts.is_empty() && conn.binds.is_empty() {
                return Verdict::Sign {
                    what: format!("an ssh login with {fp}"),
                };
            }
            return refuse(
                &format!("{fp} for a login not bound to a host"),
                "the client did not say which host (OpenSSH before 8.9, or another client)",
                Some("OpenSSH 8.9 or later, which binds each login to its host".into()),
            );
        };
        if host_key.is_some_and(|h| h != bound.as_slice()) {
            return refuse(
                fp,
                "a login naming another host key than its session's",
                None,
            );
        }
        let host = self.host_name(bound);
        if !allowed.hosts.is_empty() && !allowed.host_keys.contains(bound) {
            return refuse(
                &format!("{fp} for {host}"),
                "a host the key may not log in to (by its key in known_hosts)",
                Some(format!("--ssh-key {fp}@{}", bare_host(&host))),
            );
        }
        Verdict::Sign {
            what: format!(
                "log in to {host} as {} with {fp}",
                String::from_utf8_lossy(user)
            ),
        }
    }

    /// `session-bind@openssh.com`: remembered when the host's signature of the session
    /// checks out; a forwarding bind marks the connection.
    pub fn bind(&self, conn: &mut Connection, bind: &SessionBind<'_>) -> Result<(), Refusal> {
        if !host_signed(bind) {
            return Err(Refusal {
                kind: Kind::Agent,
                subject: format!("session-bind for {}", self.host_name(bind.host_key)),
                why: "the host's signature of the session does not check out".into(),
                fix: None,
            });
        }
        if bind.forwarding {
            conn.forwarding = true;
        }
        if conn.binds.len() >= BINDS {
            return Err(Refusal {
                kind: Kind::Agent,
                subject: "session-bind".into(),
                why: "too many sessions on one connection".into(),
                fix: None,
            });
        }
        conn.binds
            .push((bind.host_key.to_vec(), bind.session_id.to_vec()));
        Ok(())
    }
}

/// What every other request is, refused: adding, removing, locking, unknown messages and
/// extensions.
pub fn refused_request(request: &wire::AgentRequest<'_>) -> Refusal {
    use wire::code;
    let subject = match request {
        wire::AgentRequest::Other(code::ADD_IDENTITY | code::ADD_ID_CONSTRAINED) => {
            "add a key".into()
        }
        wire::AgentRequest::Other(code::REMOVE_IDENTITY) => "remove a key".into(),
        wire::AgentRequest::Other(code::REMOVE_ALL_IDENTITIES | code::REMOVE_ALL_V1) => {
            "remove every key".into()
        }
        wire::AgentRequest::Other(
            code::ADD_SMARTCARD_KEY
            | code::ADD_SMARTCARD_KEY_CONSTRAINED
            | code::REMOVE_SMARTCARD_KEY,
        ) => "add or remove a smartcard key".into(),
        wire::AgentRequest::Other(code::LOCK) => "lock the agent".into(),
        wire::AgentRequest::Other(code::UNLOCK) => "unlock the agent".into(),
        wire::AgentRequest::Extension { name, .. } => {
            format!("extension {}", String::from_utf8_lossy(name))
        }
        wire::AgentRequest::Other(n) | wire::AgentRequest::Malformed(n) => format!("message {n}"),
        wire::AgentRequest::Identities | wire::AgentRequest::Sign { .. } => "request".into(),
    };
    Refusal {
        kind: Kind::Agent,
        subject,
        why: "the sandbox's agent lists and signs only; it never changes yours".into(),
        fix: None,
    }
}

/// A signature the user declined on the terminal.
pub fn declined(what: &str) -> Refusal {
    Refusal {
        kind: Kind::Agent,
        subject: what.to_string(),
        why: "declined on the terminal (or not answered in time)".into(),
        fix: None,
    }
}

fn refuse(subject: &str, why: &str, fix: Option<String>) -> Verdict {
    Verdict::Refuse(Refusal {
        kind: Kind::Agent,
        subject: subject.to_string(),
        why: why.to_string(),
        fix,
    })
}

/// `[host]:port` → `host:port`, as `--ssh-key` takes it.
fn bare_host(name: &str) -> String {
    match name.strip_prefix('[').and_then(|r| r.split_once("]:")) {
        Some((host, port)) => format!("{host}:{port}"),
        None => name.to_string(),
    }
}

/// `SHA256:…` of a public key blob (`?` when it does not parse).
pub fn fingerprint(blob: &[u8]) -> String {
    ssh_key::PublicKey::from_bytes(blob)
        .map(|k| k.fingerprint(ssh_key::HashAlg::Sha256).to_string())
        .unwrap_or_else(|_| "an unreadable key".into())
}

/// Whether the host key signed the session identifier (as OpenSSH's agent checks).
fn host_signed(bind: &SessionBind<'_>) -> bool {
    use signature::Verifier;
    let (Ok(key), Ok(sig)) = (
        ssh_key::PublicKey::from_bytes(bind.host_key),
        ssh_key::Signature::try_from(bind.signature),
    ) else {
        return false;
    };
    Verifier::verify(key.key_data(), bind.session_id, &sig).is_ok()
}

#[cfg(test)]
mod tests;
