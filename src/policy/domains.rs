//! The network allow-list's entries: each layer's `"network"` resolved, each entry parsed
//! into a `DomainRule` (`example.com`, `*.example.com`, an address, an optional port).
//! Pure.

use std::collections::BTreeSet;

use super::config::{NetworkConfig, NetworkMode};
use super::model::{DomainRule, Layer, Network, PolicyError};

pub(super) fn resolve_network(layers: &[Layer]) -> Result<Network, PolicyError> {
    let Some((origin, network)) = layers
        .iter()
        .rev()
        .find_map(|l| l.config.network.as_ref().map(|n| (&l.origin, n)))
    else {
        return Ok(Network::None);
    };
    match network {
        NetworkConfig::Mode(NetworkMode::None) => Ok(Network::None),
        NetworkConfig::Mode(NetworkMode::Full) => Ok(Network::Full),
        NetworkConfig::Allow(list) => {
            let rules: BTreeSet<DomainRule> = list
                .allow
                .iter()
                .map(|e| parse_domain_rule(e.value(), origin))
                .collect::<Result<_, _>>()?;
            Ok(Network::Allow(rules.into_iter().collect()))
        }
    }
}

/// "example.com", "*.example.com", "1.2.3.4", "[::1]", each with an optional ":port".
pub fn parse_domain_rule(entry: &str, origin: &str) -> Result<DomainRule, PolicyError> {
    let bad = || PolicyError::BadDomain {
        origin: origin.to_string(),
        entry: entry.to_string(),
    };
    let (host, port) = split_port(entry).ok_or_else(bad)?;
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
