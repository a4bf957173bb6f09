//! The session's certificate authority: made in memory when the session starts, its
//! private key never leaving sbx-shell's memory, its certificate limited by name
//! constraints to the credentials' hosts (so that even a copy of it vouches for nothing
//! else), and one leaf certificate per host, made when the program first connects there.
//! Also the upstream side: a TLS client that verifies the real host against the system's
//! roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` of sbx-shell's own environment included).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, KeyPair, KeyUsagePurpose, NameConstraints,
};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, ServerConfig};

/// How long the authority and its certificates are valid: from a day before the session
/// started (clocks differ) to this many days after it.
const VALID_DAYS: i64 = 90;

/// The protocol both sides speak: HTTP/1.1 (the rewriter reads HTTP/1.1 heads).
const ALPN: &[u8] = b"http/1.1";

pub struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
    provider: Arc<CryptoProvider>,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(VALID_DAYS);
}

impl Authority {
    /// A new authority for the domains `permitted` (each a host name, or the domain of a
    /// `*.` entry): the only names its certificates are valid for.
    pub fn new(permitted: &[String]) -> Result<Authority, String> {
        let key = KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(
            DnType::CommonName,
            format!("sbx-shell session {} (credentials)", std::process::id()),
        );
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.name_constraints = Some(NameConstraints {
            permitted_subtrees: permitted
                .iter()
                .map(|d| GeneralSubtree::DnsName(d.clone()))
                .collect(),
            excluded_subtrees: Vec::new(),
        });
        validity(&mut params);
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("cannot make the session's authority: {e}"))?;
        Ok(Authority {
            cert,
            key,
            provider: provider(),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The authority's certificate (public), PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// The TLS server the program meets for `host`: a certificate for that name, signed by
    /// the authority (made once per host).
    pub fn server_for(&self, host: &str) -> Result<Arc<ServerConfig>, String> {
        if let Some(config) = self.leaves.lock().ok().and_then(|l| l.get(host).cloned()) {
            return Ok(config);
        }
        let key = KeyPair::generate().map_err(|e| format!("cannot make a key: {e}"))?;
        let mut params =
            CertificateParams::new(vec![host.to_string()]).map_err(|e| format!("{host}: {e}"))?;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let leaf = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(|e| format!("cannot make a certificate for {host}: {e}"))?;
        let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
            .map_err(|e| format!("{host}: {e}"))?;
        let signing = self
            .provider
            .key_provider
            .load_private_key(der)
            .map_err(|e| format!("{host}: {e}"))?;
        let chain = vec![leaf.der().clone(), self.cert.der().clone()];
        let certified = rustls::sign::CertifiedKey::new(chain, signing);
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
        config.alpn_protocols = vec![ALPN.to_vec()];
        let config = Arc::new(config);
        if let Ok(mut leaves) = self.leaves.lock() {
            leaves.insert(host.to_string(), config.clone());
        }
        Ok(config)
    }
}

/// The TLS client toward the real hosts: the system's roots (as OpenSSL finds them,
/// `SSL_CERT_FILE` and `SSL_CERT_DIR` first), HTTP/1.1.
pub fn upstream() -> Result<Arc<ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err("no trusted root certificates found on this system (ca-certificates)".into());
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authority_signs_its_hosts_and_is_constrained_to_them() {
        let authority = Authority::new(&["api.example.test".into()]).unwrap();
        let pem = authority.pem();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"), "{pem}");
        assert!(!pem.contains("PRIVATE"));
        let one = authority.server_for("api.example.test").unwrap();
        let again = authority.server_for("api.example.test").unwrap();
        assert!(Arc::ptr_eq(&one, &again));
        assert_eq!(one.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }
}
