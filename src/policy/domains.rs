//! The network allow-list's entries: each layer's `"network"` resolved, each entry parsed
//! into a `DomainRule` (`example.com`, `*.example.com`, an address, an optional port).
//! Pure.

use std::collections::BTreeSet;

use super::config::{NetworkConfig, NetworkMode};
use super::model::{DomainRule, Layer, Network, PolicyError};

/// The network from every layer, in order: `none` or `full` replaces what came before; an
/// allow-list adds its hosts to the one before it (a profile's hosts are kept when the user
/// allows one more), or replaces `none` and `full`. Each host is read with its layer's
/// origin; none of it: no network.
pub(super) fn resolve_network(layers: &[Layer]) -> Result<Network, PolicyError> {
    let mut network = Network::None;
    for layer in layers {
        network = match (&layer.config.network, network) {
            (None, kept) => kept,
            (Some(NetworkConfig::Mode(NetworkMode::None)), _) => Network::None,
            (Some(NetworkConfig::Mode(NetworkMode::Full)), _) => Network::Full,
            (Some(NetworkConfig::Allow(list)), before) => {
                let mut rules: BTreeSet<DomainRule> = match before {
                    Network::Allow(rules) => rules.into_iter().collect(),
                    Network::None | Network::Full => BTreeSet::new(),
                };
                for entry in &list.allow {
                    rules.insert(parse_domain_rule(entry.value(), &layer.origin)?);
                }
                Network::Allow(rules.into_iter().collect())
            }
        };
    }
    Ok(network)
}

/// "example.com", "*.example.com", "1.2.3.4", "[::1]", each with an optional ":port"; and
/// a service on this machine's loopback, which names its port: "localhost:5432",
/// "127.0.0.1:5432", "[::1]:5432" (`DomainRule::loopback_port`).
pub fn parse_domain_rule(entry: &str, origin: &str) -> Result<DomainRule, PolicyError> {
    let bad = || PolicyError::BadDomain {
        origin: origin.to_string(),
        entry: entry.to_string(),
    };
    let (host, port) = split_port(entry).ok_or_else(bad)?;
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback {
        let Some(port) = port else {
            return Err(PolicyError::LoopbackWithoutPort {
                origin: origin.to_string(),
                entry: entry.to_string(),
            });
        };
        return Ok(DomainRule {
            host: host.to_ascii_lowercase(),
            wildcard: false,
            port: Some(port),
        });
    }
    let (wildcard, name) = match host.strip_prefix("*.") {
        Some(name) => (true, name),
        None => (false, host),
    };
    let name = name.to_ascii_lowercase();
    let is_ip = name.parse::<std::net::IpAddr>().is_ok();
    let is_domain = name.len() <= 253
        && name.contains('.')
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if (is_ip && wildcard) || !(is_ip || is_domain) {
        return Err(bad());
    }
    Ok(DomainRule {
        host: name,
        wildcard,
        port,
    })
}

fn split_port(entry: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(port) => Some((host, Some(port.parse().ok().filter(|p| *p > 0)?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match entry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            Some((host, Some(port.parse().ok().filter(|p| *p > 0)?)))
        }
        _ => Some((entry, None)),
    }
}
