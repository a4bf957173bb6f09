//! Starting the proxy for one session: where it listens (inside the session's own network
//! namespace — bwrap's, a container's — through the helper, or on the host's loopback) and
//! where it logs. There it runs with no network too, refusing all, and the sandbox's name
//! server with it (`lookups`):
//! what the program asked for is named at the end with the option that allows it.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use super::proxy::{Proxy, SANDBOX_PORT};
use super::request;
use crate::policy::{Network, Policy};
use crate::sandbox::Backend;

/// The allow-list proxy of a session, and how the sandbox reaches it.
pub struct ProxySession {
    pub proxy: Proxy,
    /// The loopback port the sandbox connects to (`None`: Landlock alone with no network,
    /// where no TCP may be made at all).
    pub port: Option<u16>,
    /// Under bwrap: the helper makes a network namespace of its own before it opens the
    /// ports (bwrap's belongs to bwrap's first user namespace, where the helper could not
    /// bind port 53); a container's is the session's already.
    pub unshare: bool,
    /// In a network of the session's own (bwrap, a container): the helper's end of the
    /// unix socket over which it sends the listening socket (inherited by the helper; kept
    /// open here until the session ends).
    pub channel: Option<OwnedFd>,
    /// Where refusals are logged, if anywhere.
    pub log: Option<PathBuf>,
    /// Inside bwrap: the helper's end of the channel for the name server's socket.
    pub lookups: Option<OwnedFd>,
    /// Landlock alone: the abstract unix socket where sbx-shell answers the name service
    /// requests that the guard connects to it (`lookups::NAME_SERVICE_SOCKETS`).
    pub name_service: Option<String>,
    /// Inside bwrap, with host services on the allow-list: the helper's end of the channel
    /// for their listeners (`forward::serve_services_from_sandbox`).
    pub services: Option<OwnedFd>,
    /// Inside bwrap, with published ports: the guard's end of its socket maker's channel,
    /// and ours (`forward::Maker`).
    pub sockets: Option<OwnedFd>,
    pub maker: Option<super::forward::Maker>,
}

/// Start the proxy when the policy has a network allow-list, or no network under bwrap;
/// and the forwards of host services and published ports (`forward`).
pub fn start(
    policy: &Policy,
    backend: &Backend,
    resolve: &[String],
    publish: &[super::forward::Publish],
    home: &Path,
    sink: crate::policy::refusal::Sink,
) -> anyhow::Result<Option<ProxySession>> {
    let net = start_proxy(policy, backend, resolve, publish, home, sink)?;
    let own_network = net.as_ref().is_some_and(|n| n.channel.is_some());
    for &p in publish {
        let maker = net.as_ref().and_then(|n| n.maker.clone());
        if let Some(leads) = super::forward::leads(p, own_network) {
            super::forward::publish(p, leads, maker).map_err(|e| anyhow!(e))?;
        }
    }
    Ok(net)
}

fn start_proxy(
    policy: &Policy,
    backend: &Backend,
    resolve: &[String],
    publish: &[super::forward::Publish],
    home: &Path,
    sink: crate::policy::refusal::Sink,
) -> anyhow::Result<Option<ProxySession>> {
    let own_network = backend.network_of_its_own();
    let rules = match &policy.network {
        Network::Allow(rules) => Some(rules),
        _ if !resolve.is_empty() => {
            return Err(anyhow!(super::messages::resolve_without_allow_list()));
        }
        Network::None if own_network || *backend == Backend::Landlock => None,
        _ => return Ok(None),
    };
    let mut overrides = request::parse_resolve(resolve).map_err(|e| anyhow!(e))?;
    let services = policy.network.loopback_ports();
    if !services.is_empty() {
        // A host service by name: the proxy, asked for it, connects to the host's loopback.
        overrides
            .entry("localhost".into())
            .or_insert(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    }
    let log = network_log(home);
    let proxy = match rules {
        Some(rules) => Proxy::new(rules.clone(), overrides, log.clone(), sink),
        None => Proxy::no_network(log.clone(), sink),
    };
    if own_network {
        let unshare = matches!(backend, Backend::Bwrap { .. });
        return in_sandbox(proxy, log, &services, publish, unshare).map(Some);
    }
    let name_service = match backend {
        Backend::Landlock => Some(
            proxy
                .serve_name_service()
                .context("cannot start sbx-shell's name service for the sandbox")?,
        ),
        _ => None,
    };
    if rules.is_none() {
        return Ok(Some(ProxySession {
            proxy,
            port: None,
            unshare: false,
            channel: None,
            log,
            lookups: None,
            name_service,
            services: None,
            sockets: None,
            maker: None,
        }));
    }
    let port = proxy
        .listen_on_host()
        .context("cannot start the network proxy")?;
    Ok(Some(ProxySession {
        proxy,
        port: Some(port),
        unshare: false,
        channel: None,
        log,
        lookups: None,
        name_service,
        services: None,
        sockets: None,
        maker: None,
    }))
}

/// In a network namespace of the session's own (bwrap's, a container's): the proxy and
/// the name server accept on the sockets the helper opens there, the host services'
/// forwards likewise, and published ports reach in through sockets the guard makes there
/// (`forward`). `unshare`: bwrap's (`ProxySession::unshare`).
fn in_sandbox(
    proxy: Proxy,
    log: Option<PathBuf>,
    services: &[u16],
    publish: &[super::forward::Publish],
    unshare: bool,
) -> anyhow::Result<ProxySession> {
    let channel = || {
        crate::sys::process::inheritable_socketpair()
            .context("cannot create the network proxy's channel")
    };
    let (ours, theirs) = channel()?;
    proxy
        .serve_from_sandbox(ours)
        .context("cannot start the network proxy")?;
    let (ours, lookups) = channel()?;
    proxy
        .serve_lookups_from_sandbox(ours)
        .context("cannot start the sandbox's name server")?;
    if services.contains(&SANDBOX_PORT) {
        return Err(anyhow!(super::messages::service_on_proxy_port(
            SANDBOX_PORT
        )));
    }
    let services = match services.is_empty() {
        true => None,
        false => {
            let (ours, theirs) = channel()?;
            super::forward::serve_services_from_sandbox(ours)
                .context("cannot start the host services' forwards")?;
            Some(theirs)
        }
    };
    let (sockets, maker) = match publish.is_empty() {
        true => (None, None),
        false => {
            let (ours, theirs) = channel()?;
            (Some(theirs), Some(super::forward::Maker::new(ours)))
        }
    };
    Ok(ProxySession {
        proxy,
        port: Some(SANDBOX_PORT),
        unshare,
        channel: Some(theirs),
        log,
        lookups: Some(lookups),
        name_service: None,
        services,
        sockets,
        maker,
    })
}

/// `$XDG_STATE_HOME/sbx-shell/network.log` (else under ~/.local/state), its directory
/// created private; `None` when it cannot be.
fn network_log(home: &Path) -> Option<PathBuf> {
    let dir = crate::sys::files::state_dir(home);
    crate::sys::files::create_private_dir(&dir).ok()?;
    Some(dir.join("network.log"))
}
