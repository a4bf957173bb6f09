//! The network allow-list, end to end: sbx-shell's proxy in front of an origin server that
//! the test starts on loopback, reached from inside each Linux backend (as root and as
//! nobody) by curl and python's urllib; and every bypass tried from inside. Names reach the
//! origin only through `--resolve`, so nothing leaves this machine.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::sandbox::{assert_lines, each, tools_present, Lab, PYTHON};
use super::support::Shown;
use super::support::{free_port, pids_with, require, serve_loopback};

/// An HTTP origin on loopback that answers every request with what it saw, and remembers it.
struct Origin {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Origin {
    fn start() -> Origin {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let port = serve_loopback(move |stream| serve(stream, &log));
        Origin { port, seen }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// One request: "ORIGIN-OK METHOD PATH host=HOST".
fn serve(mut stream: TcpStream, log: &Mutex<Vec<String>>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => {
                log.lock().unwrap().push("RAW-CONNECTION".into());
                return;
            }
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let host = head
        .lines()
        .find_map(|l| l.strip_prefix("Host: "))
        .unwrap_or("-");
    let body = format!("ORIGIN-OK {method} {path} host={host}\n");
    log.lock().unwrap().push(body.trim().to_string());
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Tries every way in and out from inside the sandbox; one line per outcome.
const PROBE: &str = r#"
import os, socket, sys, urllib.request
port = int(sys.argv[1])
proxy = os.environ["HTTP_PROXY"]
print("PROXY", proxy)
names = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]
loopback = "localhost,127.0.0.1,::1"
if all(os.environ.get(n) == proxy for n in names) and all(os.environ.get(n) == loopback for n in ("NO_PROXY", "no_proxy")):
    print("PROXY-ENV-OK")
phost, pport = proxy.rsplit("/", 1)[1].rsplit(":", 1)
def ask(raw):
    s = socket.create_connection((phost, int(pport)), timeout=5)
    s.sendall(raw.encode())
    answer = s.recv(200).decode(errors="replace").split("\r\n")[0]
    s.close()
    return answer
try:
    print(urllib.request.urlopen("http://allowed.test:%d/py" % port, timeout=10).read().decode().strip())
except Exception as e:
    print("PY-FAILED", e)
print("IP-LITERAL", ask("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port)))
print("CONNECT-HOST-MISMATCH", ask("CONNECT allowed.test:%d HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % (port, port)))
print("GET-HOST-MISMATCH", ask("GET http://allowed.test:%d/x HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % (port, port)))
print("DUPLICATE-HOST", ask("GET http://allowed.test:%d/x HTTP/1.1\r\nHost: allowed.test:%d\r\nHost: other.test:%d\r\n\r\n" % (port, port, port)))
print("SPACED-HOST", ask("GET http://allowed.test:%d/x HTTP/1.1\r\nHost : other.test:%d\r\n\r\n" % (port, port)))
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=3); s.sendall(b"DIRECT\r\n\r\n"); s.close()
    print("DIRECT-TCP-CONNECTED")
except OSError as e:
    print("DIRECT-TCP-FAILED")
# A datagram to the host's UDP listener: under bwrap it is sent into the sandbox's own
# loopback (where nothing listens on that port); alone no UDP socket can be made.
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"UDP-LEAK", ("127.0.0.1", int(sys.argv[2])))
    print("UDP-SENT")
except OSError:
    print("UDP-FAILED")
try:
    socket.getaddrinfo("allowed.test", port); print("RESOLVED-INSIDE")
except OSError:
    print("RESOLVE-FAILED")
print("PROBE-DONE")
"#;

fn curl_present() -> bool {
    require("curl", "the allow-list's clients") && require("python3", "the bypass probes")
}

#[test]
fn the_allow_list_lets_listed_hosts_through_the_proxy_and_nothing_else() {
    if !tools_present() || !curl_present() {
        return;
    }
    each(|backend, user| {
        let origin = Origin::start();
        let port = origin.port.to_string();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_port = udp.local_addr().unwrap().port();
        let lab = Lab::new("allow", user, false);
        let what = lab.what(backend);
        let allow = format!("allow=allowed.test:{port}");
        let script = format!(
            r#"
            curl -sS --max-time 10 http://allowed.test:{port}/plain
            curl -sS --max-time 10 -p http://allowed.test:{port}/tunnel
            curl -sS --max-time 10 -o /dev/null -w 'OTHER %{{http_code}}\n' http://other.test:{port}/
            curl -sS --max-time 10 -o /dev/null -w 'OTHER-PORT %{{http_code}}\n' http://allowed.test:1/
            curl -sS --max-time 10 -p -o /dev/null -w 'OTHER-TUNNEL %{{http_code}}\n' http://other.test:{port}/ 2>/dev/null || echo OTHER-TUNNEL-REFUSED
            {PYTHON} -c '{PROBE}' {port} {udp_port}
            "#,
            PROBE = PROBE.replace('\'', "'\"'\"'"),
        );
        let args = [
            "--net",
            &allow,
            "--resolve",
            "allowed.test:127.0.0.1",
            "--resolve",
            "other.test:127.0.0.1",
            "-c",
            &script,
        ];
        // A NO_PROXY that would send allowed.test around the proxy is replaced (loopback
        // only).
        let out = lab
            .command(backend, &args)
            .env("NO_PROXY", "allowed.test,127.0.0.1")
            .env("no_proxy", "allowed.test")
            .shown();
        let (text, err) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        let what = format!("{what}\nstdout:\n{text}\nstderr:\n{err}");
        let host = format!("host=allowed.test:{port}");
        assert_lines(
            &text,
            &[
                &format!("ORIGIN-OK GET /plain {host}"),
                &format!("ORIGIN-OK GET /tunnel {host}"),
                &format!("ORIGIN-OK GET /py {host}"),
                "OTHER 403",
                "OTHER-PORT 403",
                "OTHER-TUNNEL-REFUSED",
                "IP-LITERAL HTTP/1.1 403 Forbidden",
                "CONNECT-HOST-MISMATCH HTTP/1.1 403 Forbidden",
                "GET-HOST-MISMATCH HTTP/1.1 403 Forbidden",
                "DUPLICATE-HOST HTTP/1.1 400 Bad Request",
                "SPACED-HOST HTTP/1.1 400 Bad Request",
                "DIRECT-TCP-FAILED",
                if backend == "bwrap" {
                    "UDP-SENT"
                } else {
                    "UDP-FAILED"
                },
                "RESOLVE-FAILED",
                "PROXY-ENV-OK",
                "PROBE-DONE",
            ],
            &what,
        );
        udp.set_nonblocking(true).unwrap();
        assert!(
            udp.recv(&mut [0u8; 16]).is_err(),
            "{what}: a datagram reached the host"
        );
        // The origin saw the three allowed requests, and nothing else reached it.
        let mut seen = origin.seen();
        seen.sort();
        assert_eq!(
            seen,
            [
                format!("ORIGIN-OK GET /plain {host}"),
                format!("ORIGIN-OK GET /py {host}"),
                format!("ORIGIN-OK GET /tunnel {host}"),
            ],
            "{what}"
        );
        // Refusals: counted on stderr at the end, and each one in the network log.
        let summary = err
            .lines()
            .find(|l| l.starts_with("  connections: "))
            .unwrap_or_else(|| panic!("{what}: no summary line"));
        // Eight through the proxy, and the direct connect to the host's server (with
        // Landlock alone its TCP rules refuse it; under bwrap the sandbox's own loopback,
        // where nothing listens on that port, while the host's server does).
        let refused = 9;
        assert!(
            summary.starts_with(&format!("  connections: {refused} (")),
            "{what}"
        );
        let log_path = lab.home.join(".local/state/sbx-shell/network.log");
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        // Each line starts with an RFC 3339 time (UTC); the log is private to its user.
        for line in log.lines() {
            let stamp = line.split(' ').next().unwrap_or("");
            let b = stamp.as_bytes();
            assert!(
                b.len() == 20
                    && b[4] == b'-'
                    && b[7] == b'-'
                    && b[10] == b'T'
                    && b[13] == b':'
                    && b[16] == b':'
                    && b[19] == b'Z'
                    && stamp[..4].parse::<u32>().is_ok_and(|y| y >= 2024),
                "{what}: not RFC 3339: {line}"
            );
        }
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&log_path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "{what}: the network log's mode");
        for refused in [
            format!("other.test:{port} refused: not on the allow-list"),
            "allowed.test:1 refused: port not allowed".to_string(),
            format!("127.0.0.1:{port} refused: IP address not on the allow-list"),
            format!("allowed.test:{port} refused: Host header"),
            "refused: malformed request (more than one Host header)".to_string(),
            "refused: malformed request (invalid header name)".to_string(),
        ] {
            assert!(
                log.contains(&refused),
                "{what}: {refused:?} not in the log:\n{log}"
            );
        }
        // Nothing is left behind: no process, and the proxy's port is closed.
        let proxy = text
            .lines()
            .find_map(|l| l.strip_prefix("PROXY http://"))
            .unwrap_or_else(|| panic!("{what}: no proxy"));
        assert!(pids_with(lab.dir.to_str().unwrap()).is_empty(), "{what}");
        if backend == "landlock" {
            assert!(
                TcpStream::connect(proxy).is_err(),
                "{what}: {proxy} still open"
            );
        }
    });
}

#[test]
fn the_bypass_probe_works_without_a_sandbox() {
    // Control: with full network and no sandbox the same direct connection reaches the
    // origin, so the bypass test above fails for the right reason.
    if !tools_present() || !curl_present() {
        return;
    }
    let origin = Origin::start();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let lab = Lab::new("allow-control", super::sandbox::User::Nobody, false);
    let script = format!(
        "{PYTHON} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=3).sendall(b\"GET /direct HTTP/1.1\\r\\n\\r\\n\"); print(\"DIRECT-OK\"); socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"UDP-LEAK\", (\"127.0.0.1\", {udp_port}))'; sleep 0.3",
        port = origin.port,
        udp_port = udp.local_addr().unwrap().port(),
    );
    let out = lab
        .command("none", &["--net", "full", "-c", &script])
        .shown();
    assert_lines(
        &String::from_utf8_lossy(&out.stdout),
        &["DIRECT-OK"],
        "control",
    );
    assert_eq!(origin.seen(), ["ORIGIN-OK GET /direct host=-"]);
    let mut got = [0u8; 16];
    let n = udp.recv(&mut got).unwrap();
    assert_eq!(&got[..n], b"UDP-LEAK", "control: the datagram arrives");
}

#[test]
fn resolve_without_an_allow_list_is_an_error() {
    let out = std::process::Command::new(super::support::bin())
        .args([
            "--backend",
            "none",
            "--resolve",
            "a.example.com:127.0.0.1",
            "--",
            "true",
        ])
        .shown();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--resolve applies to a network allow-list only") && err.contains("Hint:"),
        "{err}"
    );
}

/// `cmd` run with `/etc/hosts` replaced by `hosts` in a mount namespace of its own (so the
/// proxy, which resolves names on the host side, sees it), the machine's left alone.
fn with_hosts(cmd: &std::process::Command, hosts: &std::path::Path) -> std::process::Command {
    let mut wrapped = std::process::Command::new("unshare");
    wrapped
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/hosts && exec \"$@\"")
        .arg(hosts)
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear()
        .stdin(std::process::Stdio::null());
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// A refusal says what allows it, in the response and at the end: a name that resolves
/// to a private address (a company mirror) names `--resolve`, a host not on the list
/// names `--net allow=`; given the option, the request goes through.
#[test]
fn a_refusal_names_the_option_that_allows_it() {
    if !tools_present() || !curl_present() || !require("unshare", "a private /etc/hosts") {
        return;
    }
    for backend in ["bwrap", "landlock"] {
        let origin = Origin::start();
        let port = origin.port.to_string();
        let lab = Lab::new("refusal-hints", super::sandbox::User::Root, false);
        let hosts = lab.dir.join("hosts");
        std::fs::write(&hosts, "127.0.0.1 localhost\n127.0.0.1 mirror.corp.test\n").unwrap();
        let allow = format!("allow=mirror.corp.test:{port}");
        let nowhere = format!("allow=nowhere.invalid:{port}");
        let script = format!(
            "curl -sS --max-time 10 http://mirror.corp.test:{port}/mirror; echo; \
             curl -sS --max-time 10 http://other.test:{port}/; echo; \
             curl -sS --max-time 10 http://nowhere.invalid:{port}/; echo"
        );
        let run = |args: &[&str]| {
            let out = with_hosts(&lab.command(backend, args), &hosts).shown();
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        };
        let (text, err) = run(&["--net", &allow, "--net", &nowhere, "-c", &script]);
        let what = format!("{backend}\nstdout:\n{text}\nstderr:\n{err}");
        // A listed name that does not resolve: the network's answer, not a refusal the
        // sandbox counts (no option would change it).
        assert!(text.contains("name does not resolve"), "{what}");
        assert!(!err.contains("nowhere.invalid"), "{what}");
        assert!(err.contains("the sandbox refused 2 requests"), "{what}");
        assert!(
            text.contains("resolves to the non-public address 127.0.0.1")
                && text.contains("Hint: --resolve mirror.corp.test:127.0.0.1 allows it")
                // The port too: an entry without one allows 80 and 443 only.
                && text.contains(&format!("Hint: --net allow=other.test:{port} allows it")),
            "{what}"
        );
        let line = err
            .lines()
            .find(|l| l.starts_with("  connections: "))
            .unwrap_or_default();
        assert!(
            line.contains(&format!(
                "→ --resolve mirror.corp.test:127.0.0.1; --net allow=other.test:{port}"
            )),
            "{what}"
        );
        assert!(origin.seen().is_empty(), "{what}");
        // The option given: the mirror is reached.
        let (text, _) = run(&[
            "--net",
            &allow,
            "--resolve",
            "mirror.corp.test:127.0.0.1",
            "-c",
            &script,
        ]);
        assert!(
            text.contains(&format!(
                "ORIGIN-OK GET /mirror host=mirror.corp.test:{port}"
            )),
            "{backend}: {text}"
        );
    }
}

/// With no network the package managers do not retry what cannot succeed: npm's and
/// pip's retries are off unless the host sets them; with network they are left alone.
#[test]
fn without_network_package_managers_do_not_retry() {
    if !tools_present() {
        return;
    }
    let script = "echo \"npm=${npm_config_fetch_retries-unset} pip=${PIP_RETRIES-unset}\"";
    for backend in ["bwrap", "landlock"] {
        let lab = Lab::new("no-retries", super::sandbox::User::Root, false);
        let out = lab.command(backend, &["-c", script]).shown();
        assert_lines(
            &String::from_utf8_lossy(&out.stdout),
            &["npm=0 pip=0"],
            backend,
        );
        let out = lab
            .command(backend, &["-c", script])
            .env("npm_config_fetch_retries", "4")
            .shown();
        assert_lines(
            &String::from_utf8_lossy(&out.stdout),
            &["npm=4 pip=0"],
            backend,
        );
        let out = lab
            .command(backend, &["--net", "full", "-c", script])
            .shown();
        assert_lines(
            &String::from_utf8_lossy(&out.stdout),
            &["npm=unset pip=unset"],
            backend,
        );
    }
}

/// With no network, what the program asked for is refused at once and named at the end
/// with the option that allows it. Under bwrap: names looked up (getent, python) reach the
/// sandbox's name server, hosts asked of the proxy (curl) reach the proxy, which refuses
/// everything; with the option given, the host is reached. Landlock alone: the lookups
/// reach sbx-shell through the name service daemon's socket, which the guard connects
/// there; a name of the `hosts` file still resolves (curl reaches no proxy: with no
/// network none runs). The control, unconfined, names nothing.
#[test]
fn without_network_what_the_program_asked_for_is_named_at_once() {
    if !tools_present() || !curl_present() || !require("unshare", "a private /etc/hosts") {
        return;
    }
    let origin = Origin::start();
    let port = origin.port.to_string();
    let script = format!(
        r#"
        getent hosts wanted-by-getent.test || echo GETENT-FAILED
        python3 -c 'import socket; socket.getaddrinfo("wanted-by-python.test", 443)' 2>/dev/null || echo PYTHON-FAILED
        curl -sS --max-time 10 http://mirror.corp.test:{port}/wanted; echo
        grep -q '^nameserver ' /etc/resolv.conf && echo RESOLV-CONF-READ
        "#
    );
    for backend in ["bwrap", "landlock"] {
        for user in [super::sandbox::User::Root, super::sandbox::User::Nobody] {
            let lab = Lab::new("lookups", user, false);
            let hosts = lab.dir.join("hosts");
            std::fs::write(&hosts, "127.0.0.1 localhost\n127.0.0.1 mirror.corp.test\n").unwrap();
            let run = |args: &[&str]| {
                let started = std::time::Instant::now();
                let out = with_hosts(&lab.command(backend, args), &hosts).shown();
                (
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                    started.elapsed(),
                )
            };
            let seen = origin.seen().len();
            let (text, err, took) = run(&["-c", &script]);
            let what = format!("{}\nstdout:\n{text}\nstderr:\n{err}", lab.what(backend));
            assert_lines(&text, &["GETENT-FAILED", "PYTHON-FAILED"], &what);
            // The sandbox's resolv.conf (bwrap's): programs that read it themselves (Go's
            // resolver, musl) can, as root too.
            if backend == "bwrap" {
                assert_lines(&text, &["RESOLV-CONF-READ"], &what);
            }
            assert!(took < Duration::from_secs(8), "{what}: took {took:?}");
            assert_eq!(origin.seen().len(), seen, "{what}");
            assert!(
                err.contains("names looked up: 2 (wanted-by-getent.test, wanted-by-python.test)")
                    && err.contains("--net allow=wanted-by-getent.test")
                    && err.contains("--net allow=wanted-by-python.test"),
                "{what}"
            );
            if backend == "bwrap" {
                assert!(
                    text.contains("mirror.corp.test:")
                        && text.contains("the session has no network")
                        && text.contains(&format!(
                            "Hint: --net allow=mirror.corp.test:{port} allows it"
                        )),
                    "{what}"
                );
                assert!(
                    err.contains(&format!("--net allow=mirror.corp.test:{port}")),
                    "{what}"
                );
                // The option given, the host is reached.
                let allow = format!("allow=mirror.corp.test:{port}");
                let (text, _, _) = run(&[
                    "--net",
                    &allow,
                    "--resolve",
                    "mirror.corp.test:127.0.0.1",
                    "-c",
                    &script,
                ]);
                assert!(
                    text.contains(&format!(
                        "ORIGIN-OK GET /wanted host=mirror.corp.test:{port}"
                    )),
                    "{what}: {text}"
                );
            } else {
                // The hosts file's name resolved: curl got as far as connecting.
                assert!(
                    err.contains("Failed to connect to mirror.corp.test"),
                    "{what}"
                );
            }
        }
    }
    // Control: unconfined, nothing is named and the mirror is reached directly.
    let lab = Lab::new("lookups-control", super::sandbox::User::Root, false);
    let hosts = lab.dir.join("hosts");
    std::fs::write(&hosts, "127.0.0.1 localhost\n127.0.0.1 mirror.corp.test\n").unwrap();
    let out = with_hosts(&lab.command("none", &["-c", &script]), &hosts).shown();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        text.contains("ORIGIN-OK GET /wanted") && !err.contains("looked up"),
        "control: {text}\n{err}"
    );
}

/// Allow-lists add up: a host of the user's configuration (as a profile's would be) stays
/// when `--net allow=` is given, twice; `--net none` after them replaces them all. Each
/// backend, beside the origin reached bare.
#[test]
fn repeated_net_flags_add_to_the_hosts_a_lower_layer_allows() {
    if !tools_present() || !curl_present() {
        return;
    }
    let origin = Origin::start();
    let port = origin.port;
    let script = ["kept", "one", "two", "other"]
        .map(|h| {
            format!(
                "curl -sS --max-time 10 -o /dev/null -w '{h} %{{http_code}}\\n' http://{h}.test:{port}/ 2>/dev/null || echo {h} FAILED\n"
            )
        })
        .concat();
    let bare = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            &format!("http://127.0.0.1:{port}/bare"),
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&bare.stdout).contains("ORIGIN-OK GET /bare"),
        "bare: {bare:?}"
    );
    let lab = Lab::new("net-add", super::sandbox::User::Root, false);
    let config = lab.home.join(".config/sbx-shell");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.json"),
        format!(r#"{{"network": {{"allow": ["kept.test:{port}"]}}}}"#),
    )
    .unwrap();
    let mut owned: Vec<String> = ["one", "two"]
        .iter()
        .flat_map(|h| ["--net".to_string(), format!("allow={h}.test:{port}")])
        .collect();
    for host in ["kept", "one", "two", "other"] {
        owned.extend(["--resolve".to_string(), format!("{host}.test:127.0.0.1")]);
    }
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    for backend in ["bwrap", "landlock"] {
        let (_, out, err) = lab.sh(backend, &args, &script);
        let what = format!("{backend}:\n{out}\n{err}");
        assert_lines(
            &out,
            &["kept 200", "one 200", "two 200", "other 403"],
            &what,
        );
        // No --resolve: it applies to an allow-list only.
        let mut none = args[..4].to_vec();
        none.extend(["--net", "none"]);
        let (_, out, err) = lab.sh(backend, &none, &script);
        let what = format!("{backend}, then none:\n{out}\n{err}");
        assert!(!out.contains(" 200"), "{what}");
    }
}

/// A server the program starts on loopback is reached directly, by curl and by python's
/// urllib, with the proxy in place for everything else (`NO_PROXY` names loopback): under
/// bwrap, the sandbox's own loopback; under Landlock alone the host's, where the guard
/// bound it and only its port is reached. Beside the same run bare.
#[test]
fn the_programs_own_server_on_loopback_is_reached_past_the_proxy() {
    if !tools_present() || !curl_present() {
        return;
    }
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let script = format!(
        r#"{PYTHON} -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 & server=$!
        for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:{port}/ --noproxy '*' && break; sleep 0.05; done
        curl -sS --max-time 10 -o /dev/null -w 'CURL %{{http_code}}\n' http://localhost:{port}/
        {PYTHON} -c 'import urllib.request; print("URLLIB", urllib.request.urlopen("http://localhost:{port}/", timeout=10).status)'
        kill $server"#
    );
    let lab = Lab::new("loopback", super::sandbox::User::Root, false);
    let bare = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("http_proxy", "http://127.0.0.1:9")
        .env("NO_PROXY", "localhost,127.0.0.1")
        .output()
        .unwrap();
    let bare = String::from_utf8_lossy(&bare.stdout).into_owned();
    assert_lines(&bare, &["CURL 200", "URLLIB 200"], "bare");
    for backend in ["bwrap", "landlock"] {
        let (_, out, err) = lab.sh(backend, &["--net", "allow=example.test"], &script);
        assert_lines(
            &out,
            &["CURL 200", "URLLIB 200"],
            &format!("{backend}: {err}"),
        );
    }
}

/// A host service on loopback (a database, a dev server outside) is reached by name and
/// port as bare when the allow-list names it (`localhost:PORT`), and no other port of the
/// host's loopback is; under Landlock alone the closed one is named with that fix. Beside
/// the same run bare, which reaches both; as root and as nobody.
#[test]
fn a_host_service_is_reached_by_name_and_port_and_no_other() {
    if !tools_present() {
        return;
    }
    let serve_as = |reply: &'static str| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        port
    };
    let (open, closed) = (serve_as("SERVICE-OPEN\n"), serve_as("SERVICE-CLOSED\n"));
    // A port where nothing listens, on the host either: refused bare too, so not named.
    let nothing = super::support::free_port();
    let script = format!(
        r#"{PYTHON} - <<'PY'
import socket
for name, host, port in (("open-by-name", "localhost", {open}), ("open-by-address", "127.0.0.1", {open}), ("closed", "127.0.0.1", {closed}), ("nothing", "127.0.0.1", {nothing})):
    try:
        s = socket.create_connection((host, port), timeout=5)
        print(name, s.recv(64).decode().strip())
    except OSError as e:
        print(name, "REFUSED", e.errno)
PY"#
    );
    let bare = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    let bare = String::from_utf8_lossy(&bare.stdout).into_owned();
    assert_lines(
        &bare,
        &[
            "open-by-name SERVICE-OPEN",
            "closed SERVICE-CLOSED",
            "nothing REFUSED 111",
        ],
        "bare",
    );
    let allow = format!("allow=localhost:{open}");
    each(|backend, user| {
        let lab = Lab::new("hostservice", user, false);
        let (_, out, err) = lab.sh(backend, &["--net", &allow], &script);
        let what = format!("{}:\n{out}\n{err}", lab.what(backend));
        assert_lines(
            &out,
            &["open-by-name SERVICE-OPEN", "open-by-address SERVICE-OPEN"],
            &what,
        );
        let closed_line = out.lines().find(|l| l.starts_with("closed ")).unwrap_or("");
        assert!(closed_line.starts_with("closed REFUSED"), "{what}");
        // The host's service is named with what allows it (under bwrap the sandbox's own
        // loopback refuses it; with Landlock alone its rules do); the port where nothing
        // listens is refused as bare, and not named.
        assert_lines(&out, &["nothing REFUSED 111"], &what);
        assert!(
            err.contains(&format!("127.0.0.1:{closed}"))
                && err.contains(&format!("--net allow=localhost:{closed}")),
            "{what}"
        );
        assert!(!err.contains(&format!(":{nothing}")), "{what}");
    });
    // The printed fix, as printed, opens that port too.
    let lab = Lab::new("hostservice-fix", super::sandbox::User::Root, false);
    let fix = format!("allow=localhost:{closed}");
    for backend in ["bwrap", "landlock"] {
        let (_, out, err) = lab.sh(backend, &["--net", &allow, "--net", &fix], &script);
        assert_lines(
            &out,
            &["closed SERVICE-CLOSED"],
            &format!("{backend}: {err}"),
        );
    }
}

/// `--publish` makes the program's server reachable from this machine's loopback, at the
/// same port or another, on both backends; without it, under bwrap (a network of the
/// sandbox's own), the host does not reach it. Beside the same server run bare.
#[test]
fn a_published_port_reaches_the_programs_server_from_the_host() {
    if !tools_present() {
        return;
    }
    let server = |port: u16| {
        format!(
            r#"exec {PYTHON} -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", {port})); s.listen(5); s.settimeout(8)
try:
    c, _ = s.accept(); c.sendall(b"FROM-THE-PROGRAM\n"); c.close()
except OSError:
    pass
'"#
        )
    };
    // Connect until the server answers, for up to 6 s: what it said, else "".
    let reach = |port: u16| -> String {
        for _ in 0..120 {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut got = String::new();
                let _ = s.read_to_string(&mut got);
                if !got.is_empty() {
                    return got;
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        String::new()
    };
    let port = free_port();
    let mut bare = std::process::Command::new("sh")
        .args(["-c", &server(port)])
        .spawn()
        .unwrap();
    assert_eq!(reach(port), "FROM-THE-PROGRAM\n", "bare");
    bare.wait().unwrap();
    let lab = Lab::new("publish", super::sandbox::User::Root, false);
    for backend in ["bwrap", "landlock"] {
        let (inner, host) = (free_port(), free_port());
        for (publish, at) in [
            (inner.to_string(), inner),
            (format!("{host}:{inner}"), host),
        ] {
            let mut run = lab
                .command(
                    backend,
                    &["--publish", &publish, "--", "sh", "-c", &server(inner)],
                )
                .spawn()
                .unwrap();
            let got = reach(at);
            let _ = run.wait();
            assert_eq!(got, "FROM-THE-PROGRAM\n", "{backend} --publish {publish}");
        }
    }
    // A host port that is taken: an error naming a free one, before the program runs.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = lab
        .command("bwrap", &["--publish", &port, "--", "echo", "RAN"])
        .shown();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("--publish {port}: cannot listen"))
            && err.contains("Hint: publish it on a free port"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("RAN"),
        "{err}"
    );
    drop(taken);
    // Unpublished, bwrap's server is the sandbox's alone (the program still serves).
    let inner = free_port();
    let mut run = lab
        .command("bwrap", &["--", "sh", "-c", &server(inner)])
        .spawn()
        .unwrap();
    let got = reach(inner);
    let _ = run.wait();
    assert_eq!(got, "", "bwrap, not published");
}

/// A connection the program makes straight to another machine's address (ssh, a database
/// client), not through the proxy, fails as the network allows none and is named at the
/// end with what would allow it, on both backends, with no network and with an
/// allow-list; a closed port of loopback is refused as bare (ECONNREFUSED), not named.
#[test]
fn a_direct_connection_elsewhere_is_named_at_the_end() {
    if !tools_present() {
        return;
    }
    let script = format!(
        r#"{PYTHON} - <<'PY'
import socket
for to in (("192.0.2.10", 2299), ("127.0.0.1", 9)):
    try:
        socket.create_connection(to, timeout=3)
        print("CONNECTED", to[0])
    except OSError as e:
        print("REFUSED", to[0], e.errno if to[0] == "127.0.0.1" else "")
PY"#
    );
    // Control: bare, the closed loopback port answers ECONNREFUSED (111).
    let bare = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_lines(
        &String::from_utf8_lossy(&bare.stdout),
        &["REFUSED 127.0.0.1 111"],
        "bare",
    );
    let lab = Lab::new("direct", super::sandbox::User::Root, false);
    for backend in ["bwrap", "landlock"] {
        for net in ["none", "allow=example.test"] {
            let (_, out, err) = lab.sh(backend, &["--net", net], &script);
            let what = format!("{backend} --net {net}:\n{out}\n{err}");
            assert_lines(&out, &["REFUSED 127.0.0.1 111"], &what);
            assert!(
                out.lines().any(|l| l.starts_with("REFUSED 192.0.2.10")),
                "{what}"
            );
            let line = err
                .lines()
                .find(|l| l.starts_with("  connections: "))
                .unwrap_or("");
            assert!(
                line.contains("192.0.2.10:2299") && line.contains("→ "),
                "{what}"
            );
            // A closed loopback port is refused as bare and not named (nothing is there
            // to allow).
            assert!(!line.contains("127.0.0.1:9"), "{what}");
        }
    }
}
