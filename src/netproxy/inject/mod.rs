//! Credentials the proxy adds on the way out (`policy::inject`). The model: *the real value
//! never enters the sandbox; it leaves sbx-shell only inside TLS to a host named for it.*
//! The program holds a placeholder; a `CONNECT` to a credential's host is answered by the
//! proxy itself, in TLS with a certificate from the session's authority (`authority`),
//! and each request head is rewritten (`rewrite`) before it goes on in sbx-shell's own TLS
//! to the real host, whose certificate is verified (`relay`). Every other host keeps its
//! end-to-end tunnel. A placeholder sent where it does not belong (another host, plain
//! HTTP, the URL) is left as it is and named at the end of the session.

pub mod authority;
pub mod relay;
pub mod rewrite;

use std::ffi::OsStr;
use std::sync::{Arc, OnceLock};

use memchr::memmem;

use crate::netproxy::messages;
use crate::policy::Injected;
use authority::Authority;
use rewrite::{Noticed, Rewriter, Swap};

/// One credential of the session: its placeholder and its real value.
struct Secret {
    injected: Injected,
    placeholder: String,
    real: String,
}

/// The session's credentials and authority.
pub struct Intercept {
    secrets: Vec<Secret>,
    authority: Authority,
    upstream: OnceLock<Result<Arc<rustls::ClientConfig>, String>>,
}

impl std::fmt::Debug for Intercept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .secrets
            .iter()
            .map(|s| s.injected.name.as_str())
            .collect();
        write!(f, "Intercept({names:?})")
    }
}

/// Random bytes for the placeholders.
pub type Random<'a> = &'a mut dyn FnMut(&mut [u8]) -> std::io::Result<()>;

impl Intercept {
    /// The session's credentials, each real value taken from `value` (sbx-shell's own
    /// environment), each given a placeholder; and a new authority for their hosts.
    pub fn new(
        injected: &[Injected],
        value: &dyn Fn(&str) -> Option<std::ffi::OsString>,
        random: Random<'_>,
    ) -> Result<Intercept, String> {
        let mut secrets: Vec<Secret> = Vec::new();
        for c in injected {
            let name = &c.name;
            let real = value(name)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| messages::credential_unset(name))?
                .into_string()
                .map_err(|_| messages::credential_not_text(name))?;
            if real.chars().any(|ch| ch.is_control()) {
                return Err(messages::credential_control_character(name));
            }
            let placeholder = loop {
                let mut bytes = [0u8; 96];
                random(&mut bytes).map_err(|e| format!("cannot read random bytes: {e}"))?;
                let p = crate::policy::inject::placeholder(&real, &bytes);
                if !secrets
                    .iter()
                    .any(|s| s.placeholder.contains(&p) || p.contains(&s.placeholder))
                    && !real.contains(&p)
                {
                    break p;
                }
            };
            secrets.push(Secret {
                injected: c.clone(),
                placeholder,
                real,
            });
        }
        let mut permitted: Vec<String> = injected
            .iter()
            .flat_map(|c| &c.hosts)
            .map(|rule| rule.host.clone())
            .collect();
        permitted.sort();
        permitted.dedup();
        Ok(Intercept {
            secrets,
            authority: Authority::new(&permitted)?,
            upstream: OnceLock::new(),
        })
    }

    /// Whether a `CONNECT` to `host`:`port` is answered here (a credential goes there).
    pub fn intercepts(&self, host: &str, port: u16) -> bool {
        self.secrets.iter().any(|s| s.injected.goes_to(host, port))
    }

    /// The program's variables: each credential's name with its placeholder.
    pub fn placeholders(&self) -> Vec<(String, String)> {
        self.secrets
            .iter()
            .map(|s| (s.injected.name.clone(), s.placeholder.clone()))
            .collect()
    }

    /// Whether `value` holds a real value (a variable that must not reach the program).
    pub fn holds_real(&self, value: &OsStr) -> bool {
        self.secrets
            .iter()
            .any(|s| memmem::find(value.as_encoded_bytes(), s.real.as_bytes()).is_some())
    }

    /// The names whose placeholders `bytes` holds.
    pub fn named_in(&self, bytes: &[u8]) -> Vec<String> {
        self.secrets
            .iter()
            .filter(|s| memmem::find(bytes, s.placeholder.as_bytes()).is_some())
            .map(|s| s.injected.name.clone())
            .collect()
    }

    /// The authority's certificate, for the program to trust.
    pub fn authority_pem(&self) -> String {
        self.authority.pem()
    }

    /// TLS with the real host for a `CONNECT` to `host` (`relay::open`), before the
    /// program's `CONNECT` is answered.
    pub fn open(
        &self,
        upstream: &mut std::net::TcpStream,
        host: &str,
    ) -> Result<rustls::Connection, String> {
        let config = self.upstream.get_or_init(authority::upstream).clone()?;
        relay::open(upstream, config, host)
    }

    /// Serve one intercepted connection to `host`:`port` (`relay`), its TLS with the real
    /// host `outer` (`open`'s); what was noticed on the way, and the error that ended it,
    /// if one did.
    pub fn serve(
        &self,
        ends: relay::Ends,
        outer: rustls::Connection,
        host: &str,
        port: u16,
    ) -> (Vec<Noticed>, Result<(), String>) {
        let (own, foreign): (Vec<&Secret>, Vec<&Secret>) = self
            .secrets
            .iter()
            .partition(|s| s.injected.goes_to(host, port));
        let mut rewriter = Rewriter::new(
            own.iter()
                .map(|s| Swap {
                    name: s.injected.name.clone(),
                    placeholder: s.placeholder.clone().into_bytes(),
                    real: s.real.clone().into_bytes(),
                })
                .collect(),
            foreign
                .iter()
                .map(|s| (s.placeholder.clone().into_bytes(), s.injected.name.clone()))
                .collect(),
        );
        let result = self
            .authority
            .server_for(host)
            .and_then(|inner| relay::relay(ends, inner, outer, host, &mut rewriter));
        (std::mem::take(&mut rewriter.noticed), result)
    }
}

/// The files and variables that make the program trust the session's authority: `node`,
/// the authority with what the host's `NODE_EXTRA_CA_CERTS` named (Node adds them to its
/// own roots), and `bundle`, the roots sbx-shell trusts with the authority (OpenSSL, curl,
/// git, Python, Go read one file). Pure.
pub fn trust_env(
    node: &std::path::Path,
    bundle: &std::path::Path,
) -> Vec<(String, std::ffi::OsString)> {
    let mut env: Vec<(String, std::ffi::OsString)> = [
        "SSL_CERT_FILE",
        "CURL_CA_BUNDLE",
        "REQUESTS_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    ]
    .iter()
    .map(|name| (name.to_string(), bundle.as_os_str().to_owned()))
    .collect();
    env.push(("NODE_EXTRA_CA_CERTS".into(), node.as_os_str().to_owned()));
    env
}

/// Where systems keep their bundle of trusted roots (Debian and Ubuntu, Fedora, SUSE,
/// Alpine and macOS), where OpenSSL, Go and others look when no variable says.
pub const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// This system's bundle of trusted roots.
pub fn system_bundle() -> Option<std::path::PathBuf> {
    SYSTEM_BUNDLES
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn intercept(values: &[(&str, &str)], hosts: &[(&str, &[&str])]) -> Result<Intercept, String> {
        let layer: BTreeMap<String, Vec<String>> = hosts
            .iter()
            .map(|(n, h)| (n.to_string(), h.iter().map(|s| s.to_string()).collect()))
            .collect();
        let injected = crate::policy::inject::resolve([("t", &layer)].into_iter()).unwrap();
        let values: BTreeMap<String, String> = values
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let mut n = 0u8;
        Intercept::new(
            &injected,
            &|name| values.get(name).map(Into::into),
            &mut |buf| {
                for b in buf.iter_mut() {
                    n = n.wrapping_add(37);
                    *b = n;
                }
                Ok(())
            },
        )
    }

    #[test]
    fn placeholders_stand_for_the_values_and_never_hold_them() {
        let real = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let i = intercept(
            &[("GH_TOKEN", real), ("K", "sk-1")],
            &[("GH_TOKEN", &["api.github.com"]), ("K", &["a.example.org"])],
        )
        .unwrap();
        let env = i.placeholders();
        assert_eq!(env[0].0, "GH_TOKEN");
        assert!(env[0].1.starts_with("ghp_") && env[0].1 != real);
        assert!(!env.iter().any(|(_, p)| p.contains(real)));
        assert!(i.holds_real(OsStr::new(&format!("https://x:{real}@h"))));
        assert!(!i.holds_real(OsStr::new(&env[0].1)));
        assert_eq!(
            i.named_in(format!("GET /?{}", env[1].1).as_bytes()),
            vec!["K"]
        );
        assert!(i.intercepts("api.github.com", 443));
        assert!(!i.intercepts("github.com", 443));
        assert!(!format!("{i:?}").contains(real));
        assert!(!i.authority_pem().contains(real));
    }

    #[test]
    fn a_missing_or_unsendable_value_is_an_error_with_a_hint() {
        for (values, want) in [
            (&[][..], "GH_TOKEN is not set"),
            (&[("GH_TOKEN", "")][..], "GH_TOKEN is not set"),
            (&[("GH_TOKEN", "abc\n")][..], "control character"),
        ] {
            let err = intercept(values, &[("GH_TOKEN", &["api.github.com"])]).unwrap_err();
            assert!(err.contains(want) && err.contains("Hint: "), "{err}");
        }
    }

    #[test]
    fn the_program_trusts_the_authority_through_the_usual_variables() {
        let env = trust_env(
            std::path::Path::new("/s/node.pem"),
            std::path::Path::new("/s/b.pem"),
        );
        let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(get("SSL_CERT_FILE"), Some("/s/b.pem".into()));
        assert_eq!(get("GIT_SSL_CAINFO"), Some("/s/b.pem".into()));
        assert_eq!(get("REQUESTS_CA_BUNDLE"), Some("/s/b.pem".into()));
        assert_eq!(get("CURL_CA_BUNDLE"), Some("/s/b.pem".into()));
        assert_eq!(get("NODE_EXTRA_CA_CERTS"), Some("/s/node.pem".into()));
    }
}
