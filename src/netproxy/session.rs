//! Starting the proxy for one session: where it listens (inside bwrap's network namespace,
//! through the helper, or on the host's loopback) and where it logs.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use super::{request, Proxy, SANDBOX_PORT};
use crate::policy::{Network, Policy};
use crate::sandbox::Backend;

/// The allow-list proxy of a session, and how the sandbox reaches it.
pub struct ProxySession {
    pub proxy: Proxy,
    /// The loopback port the sandbox connects to.
    pub port: u16,
    /// Inside bwrap: the helper's end of the unix socket over which it sends the listening
    /// socket (inherited by the helper; kept open here until the session ends).
    pub channel: Option<OwnedFd>,
    /// Where refusals are logged, if anywhere.
    pub log: Option<PathBuf>,
}

/// Start the proxy when the policy has a network allow-list.
pub fn start(
    policy: &Policy,
    backend: &Backend,
    resolve: &[String],
    home: &Path,
) -> anyhow::Result<Option<ProxySession>> {
    let Network::Allow(rules) = &policy.network else {
        if !resolve.is_empty() {
            return Err(anyhow!("--resolve applies to a network allow-list only\nHint: add --net allow=HOST,… or leave out --resolve"));
        }
        return Ok(None);
    };
    let overrides = request::parse_resolve(resolve).map_err(|e| anyhow!(e))?;
    let log = network_log(home);
    let proxy = Proxy::new(rules.clone(), overrides, log.clone());
    if let Backend::Bwrap { .. } = backend {
        let (ours, theirs) = crate::process::inheritable_socketpair()
            .context("cannot create the network proxy's channel")?;
        proxy
            .serve_from_sandbox(ours)
            .context("cannot start the network proxy")?;
        return Ok(Some(ProxySession {
            proxy,
            port: SANDBOX_PORT,
            channel: Some(theirs),
            log,
        }));
    }
    let port = proxy
        .listen_on_host()
        .context("cannot start the network proxy")?;
    Ok(Some(ProxySession {
        proxy,
        port,
        channel: None,
        log,
    }))
}

/// `$XDG_STATE_HOME/sbx-shell/network.log` (else under ~/.local/state), its directory
/// created private; `None` when it cannot be.
fn network_log(home: &Path) -> Option<PathBuf> {
    let dir = crate::sessionlog::state_dir(home);
    crate::files::create_private_dir(&dir).ok()?;
    Some(dir.join("network.log"))
}
