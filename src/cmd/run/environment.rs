//! What the program is given besides its policy: the session's own places (the state the
//! policy makes writable, the repositories found in the writable trees, the session's
//! private directories) and its environment.

use super::context::Run;
use super::messages;
use super::prepare::Plan;
use crate::netproxy;
use crate::policy::launch::{self};
use crate::policy::refusal;
use crate::sandbox::{self, Backend};
use crate::session::journal::{self, Journal};
use crate::session::temp::SessionTemp;
use crate::sys::exit::Failure;
use anyhow::Context as _;
use std::ffi::OsString;
use std::path::Path;

/// The private home's variables (`policy::home::variables`), except those the policy's
/// `environment.set` names: an explicit setting wins.
fn private_home_env(plan: &Plan) -> Vec<(String, std::ffi::OsString)> {
    let Some(home) = &plan.policy.private_home else {
        return Vec::new();
    };
    let mut vars = crate::policy::home::variables(home, &plan.launch.shell, &|name| {
        std::env::var_os(name).is_some()
    });
    vars.retain(|(name, _)| !plan.policy.environment.set.contains_key(name));
    vars
}

/// With no network, the package managers' retries turned off (`netproxy::NO_NETWORK_ENV`),
/// unless the host's environment or the policy's `environment.set` names them.
fn no_network_env(plan: &Plan) -> Vec<(String, std::ffi::OsString)> {
    if plan.policy.network != crate::policy::Network::None {
        return Vec::new();
    }
    netproxy::NO_NETWORK_ENV
        .iter()
        .filter(|(name, _)| {
            std::env::var_os(name).is_none() && !plan.policy.environment.set.contains_key(*name)
        })
        .map(|(name, value)| (name.to_string(), value.into()))
        .collect()
}

/// Each inherited variable the policy keeps from the program, recorded as refused with the
/// option that passes it (`refusal::of_variable`).
fn record_dropped(
    policy: &crate::policy::Policy,
    inherited: &[(OsString, OsString)],
    hidden_socket: &dyn Fn(&str, &std::ffi::OsStr) -> bool,
    journal: &Journal,
) {
    for (name, value) in inherited {
        let Some(name) = name.to_str() else { continue };
        if let Some(dropped) = policy.environment.verdict(name, value, hidden_socket) {
            journal.record(&refusal::of_variable(name, dropped), 1);
        }
    }
}

/// Landlock alone in workspace-write: the session's private temporary directory, in place
/// of the private `/tmp` bwrap gives (`session::temp`).
fn session_temp(plan: &Plan, backend: &Backend) -> Result<Option<SessionTemp>, Failure> {
    let fs = &plan.policy.filesystem;
    if !backend.landlock_alone()
        || fs.mode != crate::policy::config::FsMode::WorkspaceWrite
        || !fs.private_tmp_writable
    {
        return Ok(None);
    }
    let temp = SessionTemp::create()
        .with_context(|| messages::session_dir_not_made("private temporary directory", "/tmp"))?;
    Ok(Some(temp))
}

/// Landlock alone: the session's own directory standing for `/dev/shm` (`session::temp`),
/// unless the policy makes the host's writable.
fn session_shm(plan: &Plan, backend: &Backend) -> Result<Option<SessionTemp>, Failure> {
    if !backend.landlock_alone() || sandbox::landlock::host_shm_writable(&plan.policy.filesystem) {
        return Ok(None);
    }
    let shm = SessionTemp::create_shm()
        .with_context(|| messages::session_dir_not_made("shared memory directory", "/dev/shm"))?;
    Ok(Some(shm))
}

/// The session's private directories, Landlock alone: its temporary directory (in
/// workspace-write) and the one standing for `/dev/shm`.
#[derive(Clone, Copy)]
pub(super) struct SessionDirs<'a> {
    pub(super) temp: Option<&'a Path>,
    pub(super) shm: Option<&'a Path>,
}

/// The temporary-directory variables naming the session's directory, except those the
/// policy's `environment.set` names.
fn temp_env(plan: &Plan, temp: Option<&SessionTemp>) -> Vec<(String, std::ffi::OsString)> {
    let mut vars = temp.map(SessionTemp::env).unwrap_or_default();
    vars.retain(|(name, _)| !plan.policy.environment.set.contains_key(name));
    vars
}

/// The session's own places, made before the sandbox starts: the state the policy makes
/// writable (`prepare::create_state`), the repositories in the writable trees, and the
/// session's private directories (Landlock alone).
pub(super) struct Places {
    pub(super) git: crate::protect::repos::Repos,
    temp: Option<SessionTemp>,
    shm: Option<SessionTemp>,
}

impl Places {
    pub(super) fn make(run: &Run) -> Result<Places, Failure> {
        let (plan, backend) = (&run.plan, &run.backend);
        super::prepare::create_state(&plan.policy, run.say)?;
        if !matches!(backend, Backend::Bwrap { .. }) {
            super::prepare::seed_npm(&plan.policy, run.say);
        }
        Ok(Places {
            git: crate::protect::repos::scan_writable(&plan.policy),
            temp: session_temp(plan, backend)?,
            shm: session_shm(plan, backend)?,
        })
    }

    pub(super) fn dirs(&self) -> SessionDirs<'_> {
        SessionDirs {
            temp: self.temp.as_ref().map(SessionTemp::path),
            shm: self.shm.as_ref().map(SessionTemp::path),
        }
    }

    /// The session's temporary directory, removed once the program's tree is gone.
    pub(super) fn end_temp(&mut self) {
        self.temp = None;
    }
}

/// The program's environment: the host's, filtered by the policy (`Environment::apply`,
/// sockets checked) and without a variable that holds a credential's real value, with the
/// proxy's variables, the private home's, the session's temporary directory, the
/// no-network settings, and what the session's ssh and credentials give.
pub(super) fn child_env(run: &Run, places: &Places) -> Vec<(OsString, OsString)> {
    let (plan, backend, journal) = (&run.plan, &run.backend, &run.journal);
    let credentials = run.credentials.as_ref();
    let given = [
        run.ssh.as_ref().map(|s| &s.env),
        credentials.map(|c| &c.env),
    ];
    let given: Vec<(String, OsString)> = given.into_iter().flatten().flatten().cloned().collect();
    let mut inherited: Vec<_> = std::env::vars_os().collect();
    if let Some(credentials) = credentials {
        inherited.retain(|(name, value)| {
            let set = given.iter().any(|(s, _)| name == s.as_str());
            let keep = set || !credentials.holds_real(value);
            if !keep {
                journal.record(
                    &refusal::Refusal {
                        kind: refusal::Kind::Variable,
                        subject: name.to_string_lossy().into_owned(),
                        why: "its value holds a credential's real value (--credential)".into(),
                        fix: None,
                    },
                    1,
                );
            }
            keep
        });
    }
    let sockets = crate::host::sockets::variable_check(
        &plan.policy,
        run.host.place.runtime_dir.as_deref(),
        &inherited,
        *backend != Backend::None,
    );
    // What the session's ssh and credentials set in place of an inherited variable is not
    // a refusal.
    let dropped: Vec<_> = inherited
        .iter()
        .filter(|(n, _)| !given.iter().any(|(s, _)| n == s.as_str()))
        .cloned()
        .collect();
    record_dropped(&plan.policy, &dropped, &sockets, journal);
    let refusals: Vec<(String, OsString)> = journal
        .path()
        .map(|p| (journal::VARIABLE.to_string(), p.as_os_str().to_owned()))
        .into_iter()
        .collect();
    launch::child_env(
        plan.policy
            .environment
            .apply(inherited.iter().cloned(), backend.name(), &sockets),
        run.net().and_then(|n| n.port).map(netproxy::proxy_env),
        [
            private_home_env(plan),
            temp_env(plan, places.temp.as_ref()),
            no_network_env(plan),
            refusals,
            given,
        ]
        .concat(),
        &plan.launch.shell,
    )
}
