//! Credentials the proxy adds on the way out (`--credential VAR@HOST,…`, `"credentials"`):
//! the program sees `VAR` set to a placeholder of the session's, and the proxy puts the
//! real value in its place in the headers of HTTPS requests to those hosts only
//! (`netproxy::inject`). The model: *the real value never enters the sandbox; it leaves
//! sbx-shell only inside TLS to a host named for it.* Pure: the value and the random bytes
//! come in as arguments.

use super::domains::parse_domain_rule;
use super::model::{Injected, Network, PolicyError};

/// What a credential does, in words (`explain`, `why`): never its value.
pub fn describe(c: &Injected) -> String {
    format!(
        "{} goes to {} only: the program holds a placeholder, and sbx-shell's proxy puts the \
            real value in its place in the headers of HTTPS requests there (the program trusts the \
            session's certificate authority through SSL_CERT_FILE, NODE_EXTRA_CA_CERTS and the \
            like)",
        c.name,
        c.hosts_text()
    )
}

/// `VAR@HOST[,HOST…]` (the flag's spelling): the name and the hosts as written.
pub fn split_flag(spec: &str) -> Option<(&str, Vec<&str>)> {
    let (name, hosts) = spec.split_once('@')?;
    let hosts: Vec<&str> = hosts.split(',').collect();
    (!name.is_empty() && hosts.iter().all(|h| !h.is_empty())).then_some((name, hosts))
}

/// Every layer's credentials, in order (`origin`, then each variable with its hosts): a
/// variable named again adds hosts. A host is a domain name, `*.domain`, with an optional
/// port; an address or this machine's loopback is refused (the proxy verifies the real
/// host's certificate by its name).
pub fn resolve<'a>(
    layers: impl Iterator<Item = (&'a str, &'a std::collections::BTreeMap<String, Vec<String>>)>,
) -> Result<Vec<Injected>, PolicyError> {
    let mut all: Vec<Injected> = Vec::new();
    for (origin, credentials) in layers {
        for (name, hosts) in credentials {
            let bad = |why: &str| PolicyError::BadCredential {
                origin: origin.to_string(),
                name: name.clone(),
                why: why.to_string(),
            };
            if !super::model::is_variable_name(name) {
                return Err(bad("not an environment variable name"));
            }
            if hosts.is_empty() {
                return Err(bad("no host named"));
            }
            let mut rules = Vec::new();
            for host in hosts {
                let rule = parse_domain_rule(host, origin)
                    .map_err(|_| bad(&format!("{host:?} is not a host name")))?;
                if rule.host.parse::<std::net::IpAddr>().is_ok() || rule.loopback_port().is_some() {
                    return Err(bad(&format!("{host:?} is not a host name")));
                }
                rules.push(rule);
            }
            match all.iter_mut().find(|c| c.name == *name) {
                Some(known) => {
                    for rule in rules {
                        if !known.hosts.contains(&rule) {
                            known.hosts.push(rule);
                        }
                    }
                }
                None => all.push(Injected {
                    name: name.clone(),
                    hosts: rules,
                }),
            }
        }
    }
    Ok(all)
}

/// The network from every layer (`domains`), with the hosts of the credentials the proxy
/// adds; and those credentials.
pub(super) fn network_and_credentials(
    layers: &[super::model::Layer],
) -> Result<(Network, Vec<Injected>), PolicyError> {
    let injected = resolve(
        layers
            .iter()
            .map(|l| (l.origin.as_str(), &l.config.credentials)),
    )?;
    let network = network_with(super::domains::resolve_network(layers)?, &injected)?;
    Ok((network, injected))
}

/// The network with the credentials' hosts: added to an allow-list (none becomes the
/// allow-list of those hosts). Full network has no proxy to add them: refused.
pub fn network_with(network: Network, injected: &[Injected]) -> Result<Network, PolicyError> {
    let Some(first) = injected.first() else {
        return Ok(network);
    };
    let mut rules = match network {
        Network::Allow(rules) => rules,
        Network::None => Vec::new(),
        Network::Full => {
            return Err(PolicyError::CredentialWithFullNetwork {
                name: first.name.clone(),
                hosts: first.hosts_text(),
            })
        }
    };
    for rule in injected.iter().flat_map(|c| &c.hosts) {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
    rules.sort();
    Ok(Network::Allow(rules))
}

/// The shortest placeholder: enough random characters that no other value shares it.
const RANDOM_CHARS: usize = 24;

/// Prefixes that name a key's format and version, beyond `credentials::TOKENS`' (public:
/// the same in every key of that kind).
const FORMAT_PREFIXES: &[&str] = &[
    "sk-ant-api03-",
    "sk-ant-oat01-",
    "sk-proj-",
    "sk-svcacct-",
    "sk-admin-",
];

/// The placeholder for `real`, from `random` (one byte per character): the prefix of its
/// format, when it has a known one (`ghp_`, `github_pat_`, `sk-ant-api03-`, `AIza`: never
/// a character of the secret part), then letters and digits, as long as the real value,
/// and never shorter than the prefix and `RANDOM_CHARS`. Clients that check a key's shape
/// accept it.
pub fn placeholder(real: &str, random: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let prefix = super::credentials::TOKENS
        .iter()
        .map(|(prefix, _, _)| *prefix)
        .chain(FORMAT_PREFIXES.iter().copied())
        .filter(|prefix| real.starts_with(prefix))
        .max_by_key(|prefix| prefix.len())
        .unwrap_or("");
    let length = real
        .chars()
        .count()
        .max(prefix.len() + RANDOM_CHARS)
        .saturating_sub(prefix.len());
    let mut out = prefix.to_string();
    out.extend(
        random
            .iter()
            .cycle()
            .take(length)
            .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()])),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn layer(entries: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(n, h)| (n.to_string(), h.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    #[test]
    fn hosts_add_up_across_layers_and_bad_entries_name_their_layer() {
        let a = layer(&[("GH_TOKEN", &["api.github.com"])]);
        let b = layer(&[
            ("GH_TOKEN", &["github.com", "api.github.com"]),
            ("K", &["*.x.org:8443"]),
        ]);
        let all = resolve([("profile p", &a), ("command line", &b)].into_iter()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].name, "GH_TOKEN");
        assert_eq!(all[0].hosts_text(), "api.github.com,github.com");
        assert_eq!(all[1].hosts_text(), "*.x.org:8443");
        for (name, hosts) in [
            ("1X", &["a.org"][..]),
            ("X", &[][..]),
            ("X", &["nodot"][..]),
            ("X", &["1.2.3.4"][..]),
            ("X", &["localhost:80"][..]),
            ("X", &["a.org/x"][..]),
        ] {
            let bad = layer(&[(name, hosts)]);
            let err = resolve([("command line", &bad)].into_iter()).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with("command line: --credential"), "{text}");
            assert!(text.contains("Hint: "), "{text}");
        }
    }

    #[test]
    fn a_credential_goes_to_its_hosts_on_their_ports_only() {
        let c = &resolve(
            [(
                "f",
                &layer(&[("K", &["api.github.com", "*.example.org", "b.test:8443"])]),
            )]
            .into_iter(),
        )
        .unwrap()[0];
        assert!(c.goes_to("api.github.com", 443));
        assert!(!c.goes_to("api.github.com", 80));
        assert!(!c.goes_to("github.com", 443));
        assert!(!c.goes_to("api.github.com.evil.org", 443));
        assert!(c.goes_to("a.example.org", 443));
        assert!(!c.goes_to("example.org", 443));
        assert!(!c.goes_to("aexample.org", 443));
        assert!(c.goes_to("b.test", 8443));
        assert!(!c.goes_to("b.test", 443));
    }

    #[test]
    fn credential_hosts_join_the_allow_list_and_full_network_is_refused() {
        let c = resolve([("f", &layer(&[("K", &["api.a.org"])]))].into_iter()).unwrap();
        let Network::Allow(rules) = network_with(Network::None, &c).unwrap() else {
            panic!("not an allow-list")
        };
        assert_eq!(rules.len(), 1);
        let before = Network::Allow(vec![parse_domain_rule("b.org", "x").unwrap()]);
        let Network::Allow(rules) = network_with(before, &c).unwrap() else {
            panic!("not an allow-list")
        };
        assert_eq!(rules.len(), 2);
        let err = network_with(Network::Full, &c).unwrap_err().to_string();
        assert!(
            err.contains("--net allow=api.a.org") && err.contains("Hint: "),
            "{err}"
        );
        assert_eq!(network_with(Network::Full, &[]).unwrap(), Network::Full);
    }

    #[test]
    fn placeholders_keep_the_real_values_shape() {
        let random: Vec<u8> = (0u8..=255).collect();
        let anthropic = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789";
        let p = placeholder(anthropic, &random);
        assert!(p.starts_with("sk-ant-api03-"), "{p}");
        assert_eq!(p.len(), anthropic.len());
        assert_ne!(p, anthropic);
        let gh = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB";
        let p = placeholder(gh, &random);
        assert!(p.starts_with("ghp_") && p.len() == gh.len(), "{p}");
        let pat = "github_pat_11ABCDEFG0_abcdefghij";
        assert!(placeholder(pat, &random).starts_with("github_pat_"));
        let google = "AIzaSyA-0123456789abcdefghijklmnopqrstu";
        let p = placeholder(google, &random);
        assert_eq!(p.len(), google.len());
        assert!(p.starts_with("AIza") && !p.starts_with("AIzaSyA-"), "{p}");
        assert!(p.chars().all(|c| c.is_ascii_alphanumeric()), "{p}");
        // No character of an unknown format's value is kept.
        let p = placeholder("abcdefgh-ijkl_mnopqrstuvwxyz", &random);
        assert!(!p.starts_with("abcdefgh-"), "{p}");
        let short = placeholder("abc", &random);
        assert_eq!(short.len(), RANDOM_CHARS);
        assert!(placeholder("ünï-côdé", &random).is_ascii());
    }
}
