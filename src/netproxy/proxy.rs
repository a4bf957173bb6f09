//! The proxy: an HTTP proxy (CONNECT tunnels and plain HTTP) that admits the allow-list's
//! hosts and refuses the rest naming the option that allows them, and the answers to name
//! lookups (`lookups`) made without network; each refusal counted for the end line.

use super::lookups;
use super::request;
use super::request::{ProxyRefusal, Request, Target};
use crate::policy::refusal::{self, Kind, Sink};
use crate::policy::DomainRule;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime};

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connecting to an upstream server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The loopback port the proxy has inside bwrap's private network namespace.
pub const SANDBOX_PORT: u16 = 3128;

/// The proxy for one session.
#[derive(Clone)]
pub struct Proxy {
    shared: Arc<Shared>,
}

struct Shared {
    /// The session has no network: every request is refused (`ProxyRefusal::NoNetwork`).
    no_network: bool,
    rules: Vec<DomainRule>,
    overrides: BTreeMap<String, IpAddr>,
    log: Option<PathBuf>,
    /// Where each refusal is recorded as it happens (the session's journal).
    sink: Sink,
    stats: Mutex<Stats>,
    /// The session's credentials, when it has any (`inject`).
    inject: std::sync::OnceLock<Arc<super::inject::Intercept>>,
}

#[derive(Default)]
struct Stats {
    refused: u64,
    /// The names looked up through the sandbox's name server (`lookups`), each once.
    looked_up: std::collections::BTreeSet<String>,
}

impl Proxy {
    /// `log`: where each refusal is appended (the network log), if anywhere; `sink`: where
    /// it is recorded for the session.
    pub fn new(
        rules: Vec<DomainRule>,
        overrides: BTreeMap<String, IpAddr>,
        log: Option<PathBuf>,
        sink: Sink,
    ) -> Proxy {
        Proxy {
            shared: Arc::new(Shared {
                no_network: false,
                rules,
                overrides,
                log,
                sink,
                stats: Mutex::new(Stats::default()),
                inject: std::sync::OnceLock::new(),
            }),
        }
    }

    /// The proxy of a session with no network (bwrap): it refuses every request and
    /// names what was asked, with the option that allows it.
    pub fn no_network(log: Option<PathBuf>, sink: Sink) -> Proxy {
        Proxy {
            shared: Arc::new(Shared {
                no_network: true,
                rules: Vec::new(),
                overrides: BTreeMap::new(),
                log,
                sink,
                stats: Mutex::new(Stats::default()),
                inject: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Add the session's credentials to the requests to their hosts (`inject`); set once,
    /// before the program starts.
    pub fn set_intercept(&self, intercept: Arc<super::inject::Intercept>) {
        let _ = self.shared.inject.set(intercept);
    }

    /// Answer the name lookups on the UDP socket the helper sends over `channel` (the
    /// sandbox's name server, on its loopback: `lookups`): each is refused at once and its
    /// name counted. Returns at once, like `serve_from_sandbox`.
    pub fn serve_lookups_from_sandbox(&self, channel: OwnedFd) -> io::Result<()> {
        let proxy = self.clone();
        crate::sys::process::spawn_quiet("sbx-lookups", move || {
            if let Ok(socket) = crate::sys::fdpass::receive_fd(&channel) {
                let socket = std::net::UdpSocket::from(socket);
                proxy.answer_lookups(&socket);
            }
        })?;
        Ok(())
    }

    /// Listen on an abstract unix socket of a random name (returned) for the name service
    /// requests the guard connects the program to (Landlock alone: `lookups`); answer each
    /// as the host's `hosts` file does, else "no such host", naming it. Returns at once.
    #[cfg(target_os = "linux")]
    pub fn serve_name_service(&self) -> io::Result<String> {
        use std::os::linux::net::SocketAddrExt;
        let mut random = [0u8; 8];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
        let name = format!(
            "sbx-shell-names-{}-{}",
            std::process::id(),
            random
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        );
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
        let listener = std::os::unix::net::UnixListener::bind_addr(&addr)?;
        let proxy = self.clone();
        crate::sys::process::spawn_quiet("sbx-names", move || {
            for client in listener.incoming() {
                match client {
                    Ok(client) => proxy.answer_name_service(client),
                    Err(_) => thread::sleep(Duration::from_millis(20)),
                }
            }
        })?;
        Ok(name)
    }

    #[cfg(not(target_os = "linux"))]
    pub fn serve_name_service(&self) -> io::Result<String> {
        Err(io::Error::other("Landlock exists on Linux only"))
    }

    /// One request on `client` (`lookups::nscd_asked`): a name of the `hosts` file is
    /// answered with its addresses (getaddrinfo's) or left to the program's own look in the
    /// file (gethostbyname's: closed, so it asks its other sources, which without network
    /// fail at once); any other name is answered "no such host" and counted; any other
    /// request is closed unanswered, as where no such daemon runs.
    #[cfg(target_os = "linux")]
    fn answer_name_service(&self, mut client: std::os::unix::net::UnixStream) {
        let _ = client.set_read_timeout(Some(Duration::from_secs(2)));
        let mut header = [0u8; lookups::NSCD_HEADER];
        if client.read_exact(&mut header).is_err() {
            return;
        }
        let Some(len) = lookups::nscd_key_len(&header) else {
            return;
        };
        let mut key = vec![0u8; len];
        if client.read_exact(&mut key).is_err() {
            return;
        }
        let lookups::Asked::Host { name, getai } = lookups::nscd_asked(&header, &key) else {
            return;
        };
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let local = lookups::in_hosts_file(&hosts, &name);
        let answer = match (local.is_empty(), getai) {
            (false, true) => lookups::nscd_found(&name, &local),
            (false, false) => return,
            (true, _) => {
                self.looked_up(&name);
                lookups::nscd_not_found(getai)
            }
        };
        let _ = client.write_all(&answer);
    }

    fn answer_lookups(&self, socket: &std::net::UdpSocket) {
        let mut buf = [0u8; lookups::MAX_QUERY];
        loop {
            let (n, from) = match socket.recv_from(&mut buf) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The sandbox's network namespace is gone.
                Err(_) => return,
            };
            let query = buf.get(..n).unwrap_or_default();
            let (Some((name, _)), Some(answer)) =
                (lookups::question(query), lookups::refused(query))
            else {
                continue;
            };
            let _ = socket.send_to(&answer, from);
            self.looked_up(&name);
        }
    }

    /// A name the program looked up: counted and logged once, with the option that allows
    /// it when that is the allow-list (a listed host is reached through the proxy, which
    /// resolves it: the program's own lookup is refused all the same).
    fn looked_up(&self, name: &str) {
        let target = Target {
            host: name.to_string(),
            port: 443,
        };
        let listed = request::check(&self.shared.rules, &target).is_ok();
        let new = (self.shared.stats.lock()).is_ok_and(|mut s| s.looked_up.insert(name.into()));
        if !new {
            return;
        }
        let why = if listed {
            "names are resolved by the proxy only (HTTPS_PROXY)"
        } else if self.shared.no_network {
            "the session has no network"
        } else {
            "not on the allow-list"
        };
        self.log_line(name, &format!("looked up: refused ({why})"));
        self.shared.sink.record(refusal::Refusal {
            kind: Kind::Lookup,
            subject: name.to_string(),
            why: why.into(),
            fix: (lookups::is_host_name(name) && !listed).then(|| format!("--net allow={name}")),
        });
    }

    /// Listen on a loopback port of the host; returns the port. Serves until sbx-shell ends.
    pub fn listen_on_host(&self) -> io::Result<u16> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let port = listener.local_addr()?.port();
        let proxy = self.clone();
        crate::sys::process::spawn_quiet("sbx-proxy", move || proxy.accept_loop(listener))?;
        Ok(port)
    }

    /// Serve the listening socket that the helper sends over `channel` (from inside bwrap's
    /// network namespace: Linux). Returns at once; a helper that never sends leaves the
    /// thread waiting until sbx-shell ends.
    pub fn serve_from_sandbox(&self, channel: OwnedFd) -> io::Result<()> {
        let proxy = self.clone();
        crate::sys::process::spawn_quiet("sbx-proxy", move || {
            if let Ok(listener) = crate::sys::fdpass::receive_fd(&channel) {
                let listener = TcpListener::from(listener);
                proxy.accept_loop(listener);
            }
        })?;
        Ok(())
    }

    /// How many connections and names were refused so far.
    pub fn refused(&self) -> u64 {
        self.shared
            .stats
            .lock()
            .map_or(0, |s| s.refused + s.looked_up.len() as u64)
    }

    fn accept_loop(&self, listener: TcpListener) {
        for client in listener.incoming() {
            let Ok(client) = client else {
                // Out of fds or memory: wait rather than spin.
                thread::sleep(Duration::from_millis(20));
                continue;
            };
            let proxy = self.clone();
            let _ = crate::sys::process::spawn_quiet("sbx-proxy", move || proxy.handle(client));
        }
    }

    fn handle(&self, mut client: TcpStream) {
        let (head, extra) = match read_head(&mut client) {
            Ok(read) => read,
            Err(_) => return,
        };
        let request = match request::parse(&head) {
            Ok(request) => request,
            Err(rejected) => {
                let unknown = Target {
                    host: "?".into(),
                    port: 0,
                };
                let target = rejected.target.unwrap_or(unknown);
                return self.refuse(&mut client, &target, &rejected.refusal);
            }
        };
        if self.shared.no_network {
            return self.refuse(&mut client, &request.target, &ProxyRefusal::NoNetwork);
        }
        if let Err(refusal) = request::check(&self.shared.rules, &request.target) {
            return self.refuse(&mut client, &request.target, &refusal);
        }
        let addrs = match self.resolve(&request.target) {
            Ok(addrs) => addrs,
            Err(refusal) => return self.refuse(&mut client, &request.target, &refusal),
        };
        let Some(upstream) = addrs
            .iter()
            .find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok())
        else {
            self.log(&request.target, "failed: cannot connect");
            let _ = respond(&mut client, "502 Bad Gateway", "sbx-shell: cannot connect");
            return;
        };
        // A relay: each piece goes on as it comes (Nagle's wait for an acknowledgement,
        // which the other end delays, cost a request 40 ms here).
        let _ = client
            .set_nodelay(true)
            .and_then(|()| upstream.set_nodelay(true));
        let inject = self.shared.inject.get();
        let target = &request.target;
        if let Some(inject) =
            inject.filter(|i| request.connect && i.intercepts(&target.host, target.port))
        {
            return self.intercept(inject, client, upstream, target, extra);
        }
        if let Some(inject) = inject.filter(|_| !request.connect) {
            for name in inject.named_in(&request.forward_head) {
                self.noticed(target, &name, "its placeholder went over plain HTTP: not replaced (credentials go over HTTPS only)", None);
            }
        }
        let _ = tunnel(client, upstream, &request, &extra);
    }

    /// A `CONNECT` to a credential's host, answered here (`inject`).
    fn intercept(
        &self,
        inject: &super::inject::Intercept,
        mut client: TcpStream,
        mut upstream: TcpStream,
        target: &Target,
        early: Vec<u8>,
    ) {
        let outer = match inject.open(&mut upstream, &target.host) {
            Ok(outer) => outer,
            Err(e) => {
                self.log(target, &format!("credentials: failed: {e}"));
                let answer = super::messages::credential_tls_failed(&e);
                let _ = respond(&mut client, "502 Bad Gateway", &answer);
                return;
            }
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .is_err()
        {
            return;
        }
        let ends = super::inject::relay::Ends {
            client,
            upstream,
            early,
        };
        let (noticed, result) = inject.serve(ends, outer, &target.host, target.port);
        for seen in noticed {
            match seen {
                super::inject::rewrite::Noticed::Foreign(name) => self.noticed(
                    target,
                    &name,
                    "its placeholder went to a host it does not go to: not replaced",
                    Some(format!("--credential {name}@{}", target.host)),
                ),
                super::inject::rewrite::Noticed::InUrl(name) => self.noticed(
                    target,
                    &name,
                    "its placeholder was in the URL: not replaced (credentials go in headers only)",
                    None,
                ),
            }
        }
        if let Err(e) = result {
            self.log(target, &format!("credentials: the connection ended: {e}"));
        }
    }

    /// A placeholder seen where its credential does not go: logged, counted and recorded.
    fn noticed(&self, target: &Target, name: &str, why: &str, fix: Option<String>) {
        self.log(target, &format!("credential {name}: {why}"));
        if let Ok(mut stats) = self.shared.stats.lock() {
            stats.refused += 1;
        }
        self.shared.sink.record(refusal::Refusal {
            kind: Kind::Credential,
            subject: format!("{name} to {target}"),
            why: why.into(),
            fix,
        });
    }

    /// The addresses to connect to: `--resolve`'s, the IP literal itself, or the public ones
    /// that the name resolves to.
    fn resolve(&self, target: &Target) -> Result<Vec<SocketAddr>, ProxyRefusal> {
        if let Some(addr) = self.shared.overrides.get(&target.host) {
            return Ok(vec![SocketAddr::new(*addr, target.port)]);
        }
        if let Ok(ip) = target.host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, target.port)]);
        }
        let all: Vec<SocketAddr> = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(|_| ProxyRefusal::Unresolved)?
            .collect();
        let public: Vec<SocketAddr> = all
            .iter()
            .copied()
            .filter(|a| request::is_public(a.ip()))
            .collect();
        match (public.is_empty(), all.first()) {
            (false, _) => Ok(public),
            (true, Some(first)) => Err(ProxyRefusal::NotPublic(first.ip())),
            (true, None) => Err(ProxyRefusal::Unresolved),
        }
    }

    /// Answer `client` with `refusal`, logged; counted and recorded as the sandbox's
    /// refusal unless the name does not resolve, which is the network's answer, not the
    /// sandbox's (no option would change it).
    fn refuse(&self, client: &mut TcpStream, target: &Target, refusal: &ProxyRefusal) {
        let reason = refusal.reason();
        self.log(target, &format!("refused: {reason}"));
        if !matches!(refusal, ProxyRefusal::Unresolved) {
            if let Ok(mut stats) = self.shared.stats.lock() {
                stats.refused += 1;
            }
            self.shared.sink.record(refusal::Refusal {
                kind: Kind::Host,
                subject: target.to_string(),
                why: reason.clone(),
                fix: refusal.fix(target),
            });
        }
        let answer = match refusal.fix(target) {
            Some(fix) => super::messages::host_refused(target, &reason, &fix),
            None => format!("sbx-shell: {target} {reason}"),
        };
        let _ = respond(client, refusal.status(), &answer);
    }

    fn log(&self, target: &Target, what: &str) {
        self.log_line(&target.to_string(), what);
    }

    fn log_line(&self, target: &str, what: &str) {
        let Some(path) = &self.shared.log else { return };
        let when = crate::sys::files::rfc3339(SystemTime::now());
        let line = format!("{when} pid={} {target} {what}\n", std::process::id());
        if let Ok(mut file) = crate::sys::files::append_private(path) {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// Read up to the end of the request head; returns the head and what came after it.
fn read_head(client: &mut TcpStream) -> io::Result<(Vec<u8>, Vec<u8>)> {
    client.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
        if let Some(end) = request::head_end(&buf) {
            let extra = buf.split_off(end);
            client.set_read_timeout(None)?;
            return Ok((buf, extra));
        }
        if buf.len() > request::MAX_HEAD {
            return Err(io::ErrorKind::InvalidData.into());
        }
    }
}

fn respond(client: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}\n",
        body.len() + 1
    );
    client.write_all(text.as_bytes())
}

/// Answer the client and move bytes both ways until both sides are done.
fn tunnel(
    mut client: TcpStream,
    mut upstream: TcpStream,
    request: &Request,
    extra: &[u8],
) -> io::Result<()> {
    if request.connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")?;
    } else {
        upstream.write_all(&request.forward_head)?;
    }
    upstream.write_all(extra)?;
    super::forward::both_ways(client, upstream)
}

/// The environment that points the program's HTTP clients at the proxy, and past it for
/// loopback only (`NO_PROXY`): a server the program started is reached directly, as bare.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut env = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        env.push((name.to_string(), url.clone()));
        env.push((name.to_ascii_lowercase(), url.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        env.push((name.to_string(), LOOPBACK_NAMES.to_string()));
    }
    env
}

/// What `NO_PROXY` names: loopback, by name and address.
pub const LOOPBACK_NAMES: &str = "localhost,127.0.0.1,::1";

/// With no network at all, the package managers' retries only delay the failure (npm
/// waits 70 s over two retries of a lookup that cannot succeed, pip 8 s over five): the
/// variables that turn them off, set unless the host or the policy sets them.
pub const NO_NETWORK_ENV: [(&str, &str); 2] =
    [("npm_config_fetch_retries", "0"), ("PIP_RETRIES", "0")];
