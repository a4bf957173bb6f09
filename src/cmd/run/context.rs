//! The run's context: what every step after the plan is final reads — the plan, the
//! machine, the backend, the journal, what was started for the session (the network, the
//! ssh agent, the credentials), when it started and how much to say. One value, made once
//! by `main` after step 4b, passed by reference; the steps before it make its parts.

use std::time::SystemTime;

use super::credentials::CredentialSession;
use super::prepare::Plan;
use super::ssh::SshSession;
use crate::host::Host;
use crate::netproxy::session::ProxySession;
use crate::policy::refusal;
use crate::sandbox::Backend;
use crate::session::journal::{Journal, Removal};
use crate::sys::say::Verbosity;

/// The run's inputs, once the plan is final. Dropped in the order of its fields: the
/// session's services before the journal they write to.
pub(super) struct Run {
    /// The session's filtered ssh agent (`None` once ended, before the journal is drained).
    pub(super) ssh: Option<SshSession>,
    pub(super) credentials: Option<CredentialSession>,
    pub(super) net: Option<ProxySession>,
    pub(super) journal: Journal,
    /// What removes the journal's file, however the run ends.
    pub(super) _journal_file: Removal,
    pub(super) plan: Plan,
    pub(super) host: Host,
    pub(super) backend: Backend,
    pub(super) started: SystemTime,
    pub(super) say: Verbosity,
}

impl Run {
    pub(super) fn net(&self) -> Option<&ProxySession> {
        self.net.as_ref()
    }

    /// What this session's refusals are judged against (`refusal::Grounds`), for the
    /// journal's readers: the policy, the home, and the directories programs run from
    /// (this process's `PATH`: the program's, but for what the policy adds).
    pub(super) fn grounds(&self) -> refusal::Grounds {
        refusal::Grounds {
            policy: self.plan.policy.clone(),
            home: self.plan.home.clone(),
            runs_from: std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default(),
        }
    }
}
