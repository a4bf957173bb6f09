//! Step 4a, when the policy names credentials (`policy::inject`): each real value read
//! from sbx-shell's environment and given a placeholder, the session's authority made,
//! the proxy told (`netproxy::inject`); the authority's certificate, alone and in a bundle
//! with the system's roots, written to a directory of the session's that the program may
//! read; and the program's variables: the placeholders, and the usual places clients read
//! their trusted roots from.

use std::ffi::{OsStr, OsString};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context as _};

use super::prepare::Plan;
use crate::netproxy::inject::{self, Intercept};
use crate::netproxy::session::ProxySession;
use crate::policy::ResolvedPath;
use crate::sandbox::Backend;
use crate::sys::exit::Failure;
use crate::sys::say::Verbosity;

/// The session's credentials: its directory (removed at the end; its lock held meanwhile),
/// the variables the program gets, and what tells a real value when it sees one.
pub(super) struct CredentialSession {
    _dir: crate::session::claim::Claim,
    pub(super) env: Vec<(String, OsString)>,
    intercept: Arc<Intercept>,
}

impl CredentialSession {
    /// Whether `value` holds a credential's real value (such a variable is kept out).
    pub(super) fn holds_real(&self, value: &OsStr) -> bool {
        self.intercept.holds_real(value)
    }
}

pub(super) fn start(
    plan: &mut Plan,
    backend: &Backend,
    net: Option<&ProxySession>,
    say: Verbosity,
) -> Result<Option<CredentialSession>, Failure> {
    let injected = plan.policy.injected.clone();
    let Some(first) = injected.first() else {
        return Ok(None);
    };
    let Some(net) = net.filter(|n| n.port.is_some()) else {
        return Err(super::messages::credential_without_proxy(&first.name).into());
    };
    let intercept = Intercept::new(&injected, &|name| std::env::var_os(name), &mut |buf| {
        std::fs::File::open("/dev/urandom")?.read_exact(buf)
    })
    .map_err(|e| anyhow!(e))?;
    let intercept = Arc::new(intercept);
    let claim = super::sessiondir::make(&plan.home, "credentials")?;
    let dir = claim.path().to_path_buf();
    let mut session = CredentialSession {
        _dir: claim,
        env: Vec::new(),
        intercept: intercept.clone(),
    };
    let trust = Trust::write(&dir, &intercept.authority_pem())?;
    let fs = &mut plan.policy.filesystem;
    fs.readable.push(ResolvedPath {
        path: dir.clone(),
        real: None,
    });
    fs.own_dirs.push(dir.clone());
    // Under bwrap the system's own bundle is shown with the authority added, for clients
    // that read it whatever the variables say.
    if let (Backend::Bwrap { .. }, Some(system)) = (backend, &trust.system) {
        let real = std::fs::canonicalize(system).unwrap_or(system.clone());
        fs.views.push((real, trust.bundle.clone()));
    }
    net.proxy.set_intercept(intercept.clone());
    let mut env: Vec<(String, OsString)> = intercept
        .placeholders()
        .into_iter()
        .map(|(name, placeholder)| (name, placeholder.into()))
        .collect();
    env.extend(trust.env());
    for c in &injected {
        say.detail(&format!(
            "sbx-shell: credential {} goes to {} (added by the proxy; the program holds a placeholder)",
            c.name,
            c.hosts_text()
        ));
    }
    session.env = env;
    Ok(Some(session))
}

/// The files that make the program trust the session's authority, in the session's
/// directory, and the bundles they stand for.
struct Trust {
    node: PathBuf,
    bundle: PathBuf,
    /// The system's bundle of trusted roots.
    system: Option<PathBuf>,
    /// sbx-shell's own `SSL_CERT_FILE`, where it names another file (a private CA's).
    own: Option<PathBuf>,
}

impl Trust {
    /// `bundle.pem`: the roots the program would trust (the system's, and those of
    /// sbx-shell's own `SSL_CERT_FILE`), with the authority; `node.pem`: what the host's
    /// `NODE_EXTRA_CA_CERTS` names, with the authority (Node adds it to its own roots).
    fn write(dir: &Path, authority: &str) -> Result<Trust, Failure> {
        let system = inject::system_bundle();
        let own = std::env::var_os("SSL_CERT_FILE")
            .map(PathBuf::from)
            .filter(|p| p.is_file() && Some(p) != system.as_ref());
        let roots = joined(system.iter().chain(own.iter()), authority);
        let node_extra = std::env::var_os("NODE_EXTRA_CA_CERTS").map(PathBuf::from);
        let extra = joined(node_extra.iter(), authority);
        let trust = Trust {
            node: dir.join("node.pem"),
            bundle: dir.join("bundle.pem"),
            system,
            own,
        };
        std::fs::write(&trust.node, extra)
            .and_then(|()| std::fs::write(&trust.bundle, roots))
            .with_context(|| {
                format!(
                    "cannot write the session's certificates in {}",
                    dir.display()
                )
            })?;
        Ok(trust)
    }

    /// The variables (`inject::trust_env`), and every other variable that names a bundle
    /// the program would have trusted (AWS_CA_BUNDLE, NIX_SSL_CERT_FILE, …) naming the
    /// session's instead.
    fn env(&self) -> Vec<(String, OsString)> {
        let mut env = inject::trust_env(&self.node, &self.bundle);
        let bundles: Vec<&PathBuf> = self.system.iter().chain(self.own.iter()).collect();
        for (name, value) in std::env::vars_os() {
            let Ok(name) = name.into_string() else {
                continue;
            };
            let names_bundle = bundles.iter().any(|b| b.as_os_str() == value);
            if names_bundle && !env.iter().any(|(n, _)| *n == name) {
                env.push((name, self.bundle.clone().into_os_string()));
            }
        }
        env
    }
}

/// The most a bundle of certificates may hold (the system's is about 200 KiB).
const BUNDLE_LIMIT: u64 = 16 << 20;

/// The certificates of `files`, each ending in a line end, then `authority`'s. A file is
/// read only when it is (or a symlink leads to) a regular file no larger than
/// `BUNDLE_LIMIT`: a FIFO or a device the host's variables name can never stall the
/// session's start; what cannot be read adds nothing.
fn joined<'a>(files: impl Iterator<Item = &'a PathBuf>, authority: &str) -> String {
    let mut text = String::new();
    for file in files {
        let read = std::fs::canonicalize(file)
            .and_then(|real| crate::sys::files::read_regular(&real, BUNDLE_LIMIT));
        text.push_str(&String::from_utf8_lossy(&read.unwrap_or_default()));
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text.push_str(authority);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_joins_regular_files_only_and_never_waits() {
        let dir = std::env::temp_dir().join(format!("sbx-bundles-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("roots.pem");
        std::fs::write(&file, "ROOTS").unwrap();
        let link = dir.join("cert.pem");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let fifo = dir.join("fifo.pem");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let files = [
            fifo,
            file,
            dir.join("missing.pem"),
            link,
            "/dev/zero".into(),
        ];
        let text = joined(files.iter(), "AUTHORITY\n");
        assert_eq!(text, "ROOTS\nROOTS\nAUTHORITY\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
