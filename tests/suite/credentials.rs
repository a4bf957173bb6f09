//! Credentials added by the proxy (`--credential VAR@HOST`), end to end: HTTPS origins on
//! loopback with a certificate authority of the test's own (which sbx-shell trusts through
//! its `SSL_CERT_FILE`), reached by name through `--resolve`; the program's real clients
//! (curl, Python's urllib and requests, Node's TLS, git, gh) inside each Linux backend, as
//! root and as nobody. The real value arrives in the headers of requests to the named host
//! only; every attack — the placeholder toward another allowed host, over plain HTTP, in a
//! body or a URL, another credential's placeholder — is run bare first (the control: the
//! real value goes wherever the program sends it) and then confined, where only the
//! placeholder goes and the attempt is named. The real value is searched for everywhere the
//! program could find it.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::sandbox::{each, tools_present, Lab, PYTHON};
use super::support::{require, serve_loopback, Shown};

pub(super) const REAL: &str = "ghp_REALVALUEzq7Xv2Lk9Pw4Rt6Yb8Nm1Hc3Jd5Fg0";
/// The real value's two halves: the probe joins them at run time, so that its own text
/// does not hold the value it searches for.
pub(super) const REAL_HEAD: &str = "ghp_REALVALUEzq7Xv2Lk9";
pub(super) const REAL_TAIL: &str = "Pw4Rt6Yb8Nm1Hc3Jd5Fg0";
const OTHER_REAL: &str = "sk-ant-api03-OTHERREALk4Jh7Gf2Ds9Aq1We3Rt5Yu8Io0";

/// One request as an origin saw it: its host, request line, headers and body.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub(super) host: String,
    pub(super) line: String,
    pub(super) head: String,
    pub(super) body: String,
}

/// An origin on loopback that answers every request `200 ORIGIN-OK`, and asks for Basic
/// credentials under `/git/` until it gets some (as a git host does). TLS with a
/// certificate of the test's authority for every `*.cred.test` name; or plain HTTP.
pub(super) struct Origin {
    pub(super) port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

/// The test's certificate authority (PEM) and the origins' TLS configuration.
pub(super) fn test_authority() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "sbx-shell test origins");
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let names = ["api.cred.test", "other.cred.test", "k2.cred.test"];
    let leaf = CertificateParams::new(names.map(String::from).to_vec())
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], der)
    .unwrap();
    (ca.pem(), Arc::new(config))
}

impl Origin {
    pub(super) fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Origin {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let port = serve_loopback(move |stream| {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
            match tls.clone() {
                Some(config) => {
                    let Ok(conn) = rustls::ServerConnection::new(config) else {
                        return;
                    };
                    serve(rustls::StreamOwned::new(conn, stream), &log);
                }
                None => serve(stream, &log),
            }
        });
        Origin { port, seen }
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Requests on one connection, kept alive, until the client ends it.
fn serve(stream: impl Read + Write, log: &Mutex<Vec<Seen>>) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(n) if n > 0 => {}
                _ => return,
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let length: usize = header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let line = head.lines().next().unwrap_or("").to_string();
        let wants_auth = line.contains(" /git/") && header("authorization").is_none();
        if line.contains(" /big ") {
            // 64 MiB, in pieces as a server writes them.
            let stream = reader.get_mut();
            let piece = vec![b'x'; 1 << 20];
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", 64 << 20);
            if stream.write_all(head.as_bytes()).is_err() {
                return;
            }
            for _ in 0..64 {
                if stream.write_all(&piece).is_err() {
                    return;
                }
            }
            let _ = stream.flush();
            continue;
        }
        log.lock().unwrap().push(Seen {
            host: header("host").unwrap_or_default(),
            line,
            head: head.clone(),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let answer = match wants_auth {
            true => "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\n\r\n".to_string(),
            false => "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nORIGIN-OK\n".to_string(),
        };
        let stream = reader.get_mut();
        let close = header("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
        if stream
            .write_all(answer.as_bytes())
            .and_then(|()| stream.flush())
            .is_err()
            || close
        {
            return;
        }
    }
}

/// Node's own TLS (what the agents' SDKs use under their proxy agents): a `CONNECT`
/// through `HTTPS_PROXY`, then TLS with the host's name; prints the answer's first line.
const NODE_CLIENT: &str = r#"
const http = require("http"), tls = require("tls");
const [host, port, path] = process.argv.slice(1);
const proxy = new URL(process.env.HTTPS_PROXY);
http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT", path: host + ":" + port, headers: {host: host + ":" + port}})
  .on("connect", (res, socket) => {
    const s = tls.connect({socket, servername: host}, () => {
      s.write("GET " + path + " HTTP/1.1\r\nHost: " + host + ":" + port + "\r\nAuthorization: Bearer " + process.env.GH_TOKEN + "\r\nConnection: close\r\n\r\n");
    });
    let out = ""; s.on("data", d => out += d); s.on("end", () => console.log("NODE " + out.split("\r\n")[0]));
    s.on("error", e => console.log("NODE-FAILED " + e.message));
  })
  .on("error", e => console.log("NODE-FAILED " + e.message)).end();
"#;

/// Every client and every attack, one line each.
fn script(api: u16, plain: u16, node: bool) -> String {
    let q = |s: &str| s.replace('\'', "'\"'\"'");
    let node = match node {
        true => format!("node -e '{}' api.cred.test {api} /node", q(NODE_CLIENT)),
        false => "echo NODE-ABSENT".into(),
    };
    format!(
        r#"
        api=https://api.cred.test:{api}
        curl -sS --max-time 20 -H "Authorization: token $GH_TOKEN" $api/curl
        {PYTHON} -c 'import os, urllib.request as u; print(u.urlopen(u.Request("'$api'/urllib", headers={{"Authorization": "Bearer " + os.environ["GH_TOKEN"]}}), timeout=20).read().decode().strip())'
        {PYTHON} -c 'import os, requests; print(requests.get("'$api'/requests", headers={{"x-api-key": os.environ["GH_TOKEN"]}}, timeout=20).text.strip())'
        {node}
        git -c credential.helper= ls-remote "https://x-access-token:$GH_TOKEN@api.cred.test:{api}/git/repo.git" >/dev/null 2>&1; echo GIT-DONE
        GH_HOST=api.cred.test:{api} gh api /gh >/dev/null 2>&1; echo GH-DONE
        curl -sS --max-time 20 -H "Authorization: token $GH_TOKEN" https://other.cred.test:{api}/other-host
        curl -sS --max-time 20 -H "Authorization: token $GH_TOKEN" http://api.cred.test:{plain}/plain
        curl -sS --max-time 20 -d "token=$GH_TOKEN" $api/body
        curl -sS --max-time 20 "$api/url?token=$GH_TOKEN"
        curl -sS --max-time 20 -H "x-api-key: $OTHER_KEY" $api/foreign
        curl -sS --max-time 60 -o /dev/null -w "BIG %{{size_download}}\n" -H "Authorization: token $GH_TOKEN" $api/big
        real="{REAL_HEAD}""{REAL_TAIL}"
        seen=$( (env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline) 2>/dev/null | tr '\0' '\n')
        found=$(printf '%s\n' "$seen" | grep -cF "$real")
        files=$(grep -rlsF "$real" "$HOME" "$PWD" /etc /run /tmp 2>/dev/null | head -3)
        echo "REAL-IN-PROCESSES $found"
        echo "REAL-IN-FILES ${{files:-none}}"
        "#
    )
}

fn node_present() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The origins' requests whose request line holds `path`.
fn at<'a>(seen: &'a [Seen], path: &str) -> Vec<&'a Seen> {
    seen.iter().filter(|s| s.line.contains(path)).collect()
}

fn basic(user_password: &str) -> String {
    use base64ct::Encoding;
    base64ct::Base64::encode_string(user_password.as_bytes())
}

#[test]
fn a_credential_reaches_its_host_in_headers_only_and_never_the_sandbox() {
    if !tools_present()
        || !require("curl", "the clients")
        || !require("git", "git over https")
        || !require("gh", "the GitHub CLI")
        || !Path::new("/usr/lib/python3/dist-packages/requests").is_dir()
            && !super::support::skipped("python3-requests is missing (scripts/test.sh installs it)")
    {
        return;
    }
    let node = node_present();
    let (ca_pem, tls) = test_authority();
    let api = Origin::start(Some(tls));
    let plain = Origin::start(None);
    let resolve =
        ["api.cred.test", "other.cred.test", "k2.cred.test"].map(|h| format!("{h}:127.0.0.1"));
    let allow = format!(
        "--net=allow=other.cred.test:{},api.cred.test:{}",
        api.port, plain.port
    );
    let credential = format!("GH_TOKEN@api.cred.test:{}", api.port);
    let enterprise = format!("GH_ENTERPRISE_TOKEN@api.cred.test:{}", api.port);
    let other = format!("OTHER_KEY@k2.cred.test:{}", api.port);
    let script = script(api.port, plain.port, node);

    // The control: bare, with the real value in the environment, every request carries
    // it wherever it goes.
    let lab = Lab::new("credentials-control", super::sandbox::User::Root, false);
    let ca_file = lab.dir.join("origins-ca.pem");
    std::fs::write(&ca_file, &ca_pem).unwrap();
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("{}\n{script}", control_resolve(api.port, plain.port)),
        ])
        .current_dir(&lab.ws)
        .env("GH_TOKEN", REAL)
        .env("GH_ENTERPRISE_TOKEN", REAL)
        .env("OTHER_KEY", OTHER_REAL)
        .env("SSL_CERT_FILE", &ca_file)
        .env("CURL_CA_BUNDLE", &ca_file)
        .env("REQUESTS_CA_BUNDLE", &ca_file)
        .env("HOME", &lab.home)
        .shown();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("REAL-IN-PROCESSES 0\n"),
        "control: bare, the probe finds the real value in the environment:\n{text}"
    );
    for path in ["/other-host", "/plain", "/body", "/url?"] {
        let seen = [api.seen(), plain.seen()].concat();
        let got = at(&seen, path);
        assert!(
            got.iter()
                .any(|s| s.head.contains(REAL) || s.body.contains(REAL) || s.line.contains(REAL)),
            "control: bare, {path} should carry the real value: {got:?}"
        );
    }
    api.seen.lock().unwrap().clear();
    plain.seen.lock().unwrap().clear();

    each(|backend, user| {
        let lab = Lab::new("credentials", user, false);
        let what = lab.what(backend);
        let ca_file = lab.dir.join("origins-ca.pem");
        std::fs::write(&ca_file, &ca_pem).unwrap();
        let mut args: Vec<&str> = vec![
            "--credential",
            &credential,
            "--credential",
            &enterprise,
            "--credential",
            &other,
            &allow,
        ];
        for r in &resolve {
            args.extend(["--resolve", r]);
        }
        args.extend(["-c", &script]);
        let out = lab
            .command(backend, &args)
            .env("GH_TOKEN", REAL)
            .env("GH_ENTERPRISE_TOKEN", REAL)
            .env("OTHER_KEY", OTHER_REAL)
            .env("SSL_CERT_FILE", &ca_file)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .shown();
        let (text, err) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let what = format!("{what}\nstdout:\n{text}\nstderr:\n{err}");
        let seen = api.seen();
        let plain_seen = plain.seen();
        api.seen.lock().unwrap().clear();
        plain.seen.lock().unwrap().clear();
        // Each client's request to the named host carries the real value in its header.
        let header = |path: &str, want: &str| {
            let got = at(&seen, path);
            assert!(
                got.iter().any(|s| s.head.contains(want)),
                "{what}\n{path}: no {want:?} in {got:?}"
            );
        };
        header("/curl", &format!("uthorization: token {REAL}\r\n"));
        header("/urllib", &format!("uthorization: Bearer {REAL}\r\n"));
        header("/requests", &format!("-api-key: {REAL}\r\n"));
        if node {
            header("/node", &format!("uthorization: Bearer {REAL}\r\n"));
        }
        header(
            "/git/",
            &format!("Basic {}", basic(&format!("x-access-token:{REAL}"))),
        );
        header("/api/v3/gh", &format!("uthorization: token {REAL}\r\n"));
        // The attacks: only the placeholder arrives.
        for path in ["/other-host", "/body", "/url?", "/foreign"] {
            let got = at(&seen, path);
            assert!(!got.is_empty(), "{what}\n{path}: never arrived");
            for s in &got {
                assert!(
                    !s.head.contains(REAL)
                        && !s.body.contains(REAL)
                        && !s.head.contains(OTHER_REAL),
                    "{what}\n{path}: the real value arrived: {s:?}"
                );
            }
        }
        let foreign = at(&seen, "/foreign");
        assert!(
            foreign
                .iter()
                .all(|s| s.head.contains("x-api-key: sk-ant-api03-")),
            "{what}"
        );
        let plain_got = at(&plain_seen, "/plain");
        assert!(!plain_got.is_empty(), "{what}\n/plain: never arrived");
        assert!(plain_got.iter().all(|s| !s.head.contains(REAL)), "{what}");
        assert!(
            seen.iter()
                .all(|s| s.host.starts_with("api.cred.test")
                    || s.host.starts_with("other.cred.test")),
            "{what}"
        );
        // A large answer arrives whole (a relay that missed a wake-up stalled one for good).
        assert!(text.contains(&format!("BIG {}\n", 64 << 20)), "{what}");
        // Nowhere inside: not in a process's environment or command line, not in a file.
        assert!(text.contains("REAL-IN-PROCESSES 0\n"), "{what}");
        assert!(text.contains("REAL-IN-FILES none\n"), "{what}");
        // Named at the end, with what allows it where something does.
        for named in [
            format!("OTHER_KEY to api.cred.test:{}", api.port),
            "--credential OTHER_KEY@api.cred.test".to_string(),
            format!("GH_TOKEN to api.cred.test:{}", plain.port),
        ] {
            assert!(err.contains(&named), "{what}\nnot named: {named}");
        }
        // Nor in what sbx-shell keeps: its log and journal.
        let state = lab.home.join(".local/state/sbx-shell");
        let kept = grep_tree(&state, REAL);
        assert!(kept.is_empty(), "{what}\nthe real value in {kept:?}");
        assert!(
            !state
                .join("credentials")
                .read_dir()
                .is_ok_and(|mut d| d.next().is_some()),
            "{what}: the session's certificates were left"
        );
    });
}

/// The control's names, as `--resolve` gives them to sbx-shell's proxy: curl's own
/// `resolve` in a `.curlrc` of the control's home (the attacks are curl's).
fn control_resolve(api: u16, plain: u16) -> String {
    let mut lines = String::from("mkdir -p \"$HOME\"; cat > \"$HOME/.curlrc\" <<'EOF'\n");
    for host in ["api", "other", "k2"] {
        for port in [api, plain] {
            lines.push_str(&format!("resolve = {host}.cred.test:{port}:127.0.0.1\n"));
        }
    }
    lines.push_str("EOF\n");
    lines
}

/// The files under `dir` that hold `needle`.
fn grep_tree(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_symlink() {
            continue;
        }
        if path.is_dir() {
            found.extend(grep_tree(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path);
        }
    }
    found
}

/// A credential's host whose certificate sbx-shell cannot verify (here: the origin's
/// authority is not among the roots sbx-shell trusts) gets the program's `CONNECT` a `502`
/// naming why, with the fix; nothing is sent to it. Bare, curl refuses the same host for
/// the same reason (the control).
#[test]
fn a_credential_host_that_fails_verification_is_refused_with_a_hint() {
    if !tools_present() || !require("curl", "the client") {
        return;
    }
    let (_, tls) = test_authority();
    let api = Origin::start(Some(tls));
    let lab = Lab::new("credentials-unverified", super::sandbox::User::Root, false);
    let url = format!("https://api.cred.test:{}/x", api.port);
    let resolve = format!("api.cred.test:{}:127.0.0.1", api.port);
    let control = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "10", "--resolve", &resolve, &url])
        .shown();
    assert!(
        String::from_utf8_lossy(&control.stderr).contains("certificate"),
        "control: bare curl should refuse the unknown authority"
    );
    let credential = format!("GH_TOKEN@api.cred.test:{}", api.port);
    let script =
        format!("curl -sS --max-time 20 -H \"Authorization: token $GH_TOKEN\" {url}; echo CURL=$?");
    let args = [
        "--credential",
        &credential,
        "--resolve",
        "api.cred.test:127.0.0.1",
        "-c",
        &script,
    ];
    let out = lab.command("landlock", &args).env("GH_TOKEN", REAL).shown();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        text.contains("CURL=56"),
        "curl should see the CONNECT refused:\n{text}\n{err}"
    );
    let log = std::fs::read_to_string(lab.home.join(".local/state/sbx-shell/network.log"))
        .unwrap_or_default();
    assert!(
        log.contains("UnknownIssuer") && !log.contains(REAL),
        "{log}"
    );
    assert!(
        api.seen().is_empty(),
        "a request reached the unverified host"
    );
}
