//! The filtered ssh agent: a unix socket sbx-shell serves outside the sandbox, the only
//! ssh agent the program can reach (`SSH_AUTH_SOCK` inside). Each request is judged
//! (`judge`, pure) and what passes goes to the user's own agent, which is never reachable
//! from inside: it lists only the keys the policy names, and signs an ssh login only for a
//! session bound to an allowed host's key, a git signature only when signing is on; every
//! other request is refused and named in the session's journal. With `confirm`, each
//! signature waits for a "y" typed on the outer terminal (`session::pty::ask`, through
//! the `Ask` given).
//!
//! One thread accepts, one per connection answers, in order (the protocol is strictly
//! request, answer); each connection has its own connection to the user's agent, made on
//! its first request that needs it. The threads block every signal and never panic on
//! input.

pub mod judge;
pub mod known_hosts;
pub mod wire;

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::policy::refusal::Sink;
use judge::{AgentRules, Connection, Verdict};
use wire::{code, AgentRequest};

/// Asks the user a question and says whether they allowed it.
pub type Ask = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What the filter serves.
pub struct AgentFilter {
    pub rules: AgentRules,
    /// The user's own agent.
    pub upstream: PathBuf,
    pub refusals: Sink,
    /// Where confirmations are asked (`None`: no terminal, so confirmed signatures are
    /// refused).
    pub ask: Option<Ask>,
}

/// Serve `filter` on `socket` (a new path in a private directory) until sbx-shell exits.
pub fn serve(socket: &Path, filter: AgentFilter) -> io::Result<()> {
    let listener = UnixListener::bind(socket)?;
    let filter = Arc::new(filter);
    crate::sys::process::spawn_quiet("sbx-agent", move || {
        for client in listener.incoming() {
            match client {
                Ok(client) => {
                    let filter = filter.clone();
                    let _ = crate::sys::process::spawn_quiet("sbx-agent", move || {
                        filter.answer_all(client)
                    });
                }
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    })?;
    Ok(())
}

/// One message from `from`: its body, or `None` at the end or on a message too long.
fn read_message(from: &mut UnixStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    from.read_exact(&mut len).ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if len > wire::MAX_MESSAGE {
        return None;
    }
    let mut body = vec![0u8; len];
    from.read_exact(&mut body).ok()?;
    Some(body)
}

const FAILURE: &[u8] = &[code::FAILURE];

impl AgentFilter {
    fn answer_all(&self, mut client: UnixStream) {
        let mut conn = Connection::default();
        let mut upstream = None;
        while let Some(body) = read_message(&mut client) {
            let answer = self.answer(&body, &mut conn, &mut upstream);
            if client.write_all(&wire::frame(&answer)).is_err() {
                return;
            }
        }
    }

    fn answer(
        &self,
        body: &[u8],
        conn: &mut Connection,
        upstream: &mut Option<UnixStream>,
    ) -> Vec<u8> {
        match wire::parse_request(body) {
            AgentRequest::Identities => self
                .pass(upstream, body)
                .and_then(|a| wire::parse_identities(&a))
                .map(|all| wire::identities_answer(&self.rules.listed(all)))
                .unwrap_or_else(|| FAILURE.to_vec()),
            AgentRequest::Sign { key, data, .. } => match self.rules.judge_sign(conn, key, data) {
                Verdict::Sign { what } => {
                    if self.rules.confirm && !self.confirmed(&what) {
                        self.refusals.record(judge::declined(&what));
                        return FAILURE.to_vec();
                    }
                    self.pass(upstream, body)
                        .unwrap_or_else(|| FAILURE.to_vec())
                }
                Verdict::Refuse(r) => {
                    self.refusals.record(r);
                    FAILURE.to_vec()
                }
            },
            AgentRequest::Extension {
                name: wire::SESSION_BIND,
                body: bind,
            } => {
                let Some(bind) = wire::parse_session_bind(bind) else {
                    return FAILURE.to_vec();
                };
                match self.rules.bind(conn, &bind) {
                    Ok(()) => vec![code::SUCCESS],
                    Err(r) => {
                        self.refusals.record(r);
                        FAILURE.to_vec()
                    }
                }
            }
            other => {
                self.refusals.record(judge::refused_request(&other));
                FAILURE.to_vec()
            }
        }
    }

    fn confirmed(&self, what: &str) -> bool {
        self.ask.as_ref().is_some_and(|ask| ask(what))
    }

    /// The user's agent's answer to `body`, on this connection's own connection to it.
    fn pass(&self, upstream: &mut Option<UnixStream>, body: &[u8]) -> Option<Vec<u8>> {
        if upstream.is_none() {
            *upstream = UnixStream::connect(&self.upstream).ok();
        }
        let stream = upstream.as_mut()?;
        let answer = stream
            .write_all(&wire::frame(body))
            .ok()
            .and_then(|()| read_message(stream));
        if answer.is_none() {
            *upstream = None;
        }
        answer
    }
}

/// The identities the user's agent at `upstream` holds (to say at start which named key
/// it lacks).
pub fn identities(upstream: &Path) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut stream = UnixStream::connect(upstream)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    stream.write_all(&wire::frame(&[code::REQUEST_IDENTITIES]))?;
    read_message(&mut stream)
        .and_then(|a| wire::parse_identities(&a))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an agent's answer"))
}
