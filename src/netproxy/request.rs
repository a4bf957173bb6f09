//! The proxy's decisions, pure: parsing a request head, matching its target against the
//! allow-list, and rewriting a plain-HTTP request for the origin server.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::policy::DomainRule;

/// The largest request head the proxy reads (request line and headers).
pub const MAX_HEAD: usize = 64 * 1024;

/// Where a request wants to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Lowercase host name or IP literal (without brackets).
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `CONNECT host:port` (a tunnel) or a plain-HTTP request in absolute form.
    pub connect: bool,
    pub target: Target,
    /// What the plain-HTTP request becomes for the origin server (origin-form request line,
    /// hop-by-hop and proxy headers removed, `Connection: close`). Empty for CONNECT.
    pub forward_head: Vec<u8>,
}

/// Why the proxy turned a request away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyRefusal {
    /// Not a request the proxy understands.
    Malformed(String),
    /// The host is not on the allow-list.
    NotAllowed,
    /// An IP address that no rule names.
    IpLiteral,
    /// The host is listed, but not for this port.
    Port,
    /// The Host header names another host than the request's target.
    HostMismatch(String),
    /// The name resolves only to addresses that are not public (loopback, private, link-local).
    NotPublic(IpAddr),
    /// The name does not resolve.
    Unresolved,
    /// The session has no network (`--net none`): nothing is allowed.
    NoNetwork,
}

impl ProxyRefusal {
    /// The reason, as the log and the summary show it.
    pub fn reason(&self) -> String {
        match self {
            ProxyRefusal::Malformed(why) => format!("malformed request ({why})"),
            ProxyRefusal::NotAllowed => "not on the allow-list".into(),
            ProxyRefusal::IpLiteral => "IP address not on the allow-list".into(),
            ProxyRefusal::Port => "port not allowed for this host".into(),
            ProxyRefusal::HostMismatch(host) => {
                format!("Host header {host:?} differs from the target")
            }
            ProxyRefusal::NotPublic(addr) => format!("resolves to the non-public address {addr}"),
            ProxyRefusal::Unresolved => "name does not resolve".into(),
            ProxyRefusal::NoNetwork => "the session has no network".into(),
        }
    }

    /// The option that allows what was refused at `target`, when one can: the allow-list
    /// for a host not on it, `--resolve` for a name that resolves to a private address (a
    /// company mirror: sbx-shell connects only to public addresses unless told).
    pub fn fix(&self, target: &Target) -> Option<String> {
        let host = &target.host;
        match self {
            // An entry without a port allows 80 and 443 only: another port is named.
            ProxyRefusal::NotAllowed | ProxyRefusal::IpLiteral | ProxyRefusal::NoNetwork
                if ![80, 443].contains(&target.port) =>
            {
                Some(format!("--net allow={host}:{}", target.port))
            }
            ProxyRefusal::NotAllowed | ProxyRefusal::IpLiteral | ProxyRefusal::NoNetwork => {
                Some(format!("--net allow={host}"))
            }
            ProxyRefusal::Port => Some(format!("--net allow={host}:{}", target.port)),
            ProxyRefusal::NotPublic(addr) => Some(match addr {
                IpAddr::V6(v6) => format!("--resolve {host}:[{v6}]"),
                IpAddr::V4(v4) => format!("--resolve {host}:{v4}"),
            }),
            _ => None,
        }
    }

    /// The HTTP status the client gets.
    pub fn status(&self) -> &'static str {
        match self {
            ProxyRefusal::Malformed(_) => "400 Bad Request",
            ProxyRefusal::Unresolved => "502 Bad Gateway",
            _ => "403 Forbidden",
        }
    }
}

/// A request turned away while parsing, with its target when that much was understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    pub target: Option<Target>,
    pub refusal: ProxyRefusal,
}

impl From<ProxyRefusal> for Rejected {
    fn from(refusal: ProxyRefusal) -> Rejected {
        Rejected {
            target: None,
            refusal,
        }
    }
}

/// The most header lines a request head may carry.
const MAX_HEADERS: usize = 128;

/// Where the head ends in `buf` (the index after its blank line), once `buf` holds it all;
/// for a head that is already malformed, the whole buffer (reading more cannot mend it, and
/// `parse` says what is wrong).
pub fn head_end(buf: &[u8]) -> Option<usize> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match httparse::Request::new(&mut headers).parse(buf) {
        Ok(httparse::Status::Complete(end)) => Some(end),
        Ok(httparse::Status::Partial) => None,
        Err(_) => Some(buf.len()),
    }
}

/// Parse a complete request head (up to and including the blank line) with httparse, a
/// maintained and fuzzed HTTP/1 parser: it refuses whitespace before a header's colon, bare
/// control characters and anything but HTTP/1.x. On top of it: exactly one `Host` header at
/// most, whose value must be an authority, and header values that are text.
pub fn parse(head: &[u8]) -> Result<Request, Rejected> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(malformed("incomplete head").into()),
        Err(e) => return Err(malformed(&e.to_string()).into()),
    }
    let (Some(method), Some(uri), Some(minor)) = (request.method, request.path, request.version)
    else {
        return Err(malformed("bad request line").into());
    };
    let headers: Vec<(&str, &str)> = request
        .headers
        .iter()
        .map(|h| {
            std::str::from_utf8(h.value)
                .map(|v| (h.name, v.trim()))
                .map_err(|_| malformed("a header value that is not text"))
        })
        .collect::<Result<_, _>>()?;
    let host_header = host_header(&headers)?;
    if method.eq_ignore_ascii_case("CONNECT") {
        let target = parse_authority(uri, None).ok_or_else(|| malformed("bad CONNECT target"))?;
        if let Some(host) = host_header {
            check_host_header(host, &target, None).map_err(|refusal| Rejected {
                target: Some(target.clone()),
                refusal,
            })?;
        }
        return Ok(Request {
            connect: true,
            target,
            forward_head: Vec::new(),
        });
    }
    let (target, path) = parse_http_url(uri)?;
    let host = host_header.ok_or_else(|| malformed("no Host header"))?;
    check_host_header(host, &target, Some(80)).map_err(|refusal| Rejected {
        target: Some(target.clone()),
        refusal,
    })?;
    Ok(Request {
        connect: false,
        forward_head: forward_head(method, &path, minor, &headers),
        target,
    })
}

fn malformed(why: &str) -> ProxyRefusal {
    ProxyRefusal::Malformed(why.to_string())
}

/// The one `Host` header's value, if there is one; two or more are refused.
fn host_header<'h>(headers: &[(&str, &'h str)]) -> Result<Option<&'h str>, ProxyRefusal> {
    let mut hosts = headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("host"));
    let first = hosts.next().map(|(_, value)| *value);
    match hosts.next() {
        Some(_) => Err(malformed("more than one Host header")),
        None => Ok(first),
    }
}

/// `http://authority/path?query` → the target and the origin-form path.
fn parse_http_url(uri: &str) -> Result<(Target, String), ProxyRefusal> {
    let rest = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("HTTP://"))
        .ok_or_else(|| malformed("only http:// URLs (use CONNECT for https)"))?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(malformed("credentials in the URL"));
    }
    let target = parse_authority(authority, Some(80)).ok_or_else(|| malformed("bad URL host"))?;
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_string()
    };
    Ok((target, path))
}

/// The plain-HTTP request as the origin gets it: origin-form, hop-by-hop and proxy headers
/// removed, `Connection: close`.
fn forward_head(method: &str, path: &str, minor: u8, headers: &[(&str, &str)]) -> Vec<u8> {
    const HOP_BY_HOP: [&str; 4] = [
        "connection",
        "proxy-connection",
        "proxy-authorization",
        "keep-alive",
    ];
    let mut forward = format!("{method} {path} HTTP/1.{minor}\r\n");
    for (name, value) in headers {
        if !HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
            forward.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    forward.push_str("Connection: close\r\n\r\n");
    forward.into_bytes()
}

/// The Host header must name the request's target (its port may be left out when it is the
/// scheme's default).
fn check_host_header(
    value: &str,
    target: &Target,
    default_port: Option<u16>,
) -> Result<(), ProxyRefusal> {
    let given = parse_authority(value, Some(default_port.unwrap_or(target.port)))
        .ok_or_else(|| malformed("bad Host header"))?;
    if given == *target {
        Ok(())
    } else {
        Err(ProxyRefusal::HostMismatch(value.to_string()))
    }
}

/// "host:port", "[v6]:port", or (with a default port) "host"; the host lowercased.
pub fn parse_authority(text: &str, default_port: Option<u16>) -> Option<Target> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        host.parse::<std::net::Ipv6Addr>().ok()?;
        match after.strip_prefix(':') {
            Some(port) => (host, port.parse().ok()?),
            None if after.is_empty() => (host, default_port?),
            None => return None,
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, port.parse().ok()?),
            None => (text, default_port?),
        }
    };
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    (valid && port != 0).then(|| Target {
        host: host.trim_end_matches('.').to_ascii_lowercase(),
        port,
    })
}

/// Does the allow-list let this target through? A rule without a port allows 80 and 443.
pub fn check(rules: &[DomainRule], target: &Target) -> Result<(), ProxyRefusal> {
    let is_ip = target.host.parse::<IpAddr>().is_ok();
    let host_matches = |rule: &DomainRule| {
        if rule.wildcard {
            !is_ip
                && target
                    .host
                    .strip_suffix(rule.host.as_str())
                    .is_some_and(|prefix| prefix.len() > 1 && prefix.ends_with('.'))
        } else if is_ip {
            rule.host.parse::<IpAddr>().ok() == target.host.parse::<IpAddr>().ok()
        } else {
            rule.host == target.host
        }
    };
    let matching: Vec<&DomainRule> = rules.iter().filter(|r| host_matches(r)).collect();
    if matching.is_empty() {
        return Err(if is_ip {
            ProxyRefusal::IpLiteral
        } else {
            ProxyRefusal::NotAllowed
        });
    }
    let port_ok = matching.iter().any(|r| match r.port {
        Some(port) => port == target.port,
        None => target.port == 443 || target.port == 80,
    });
    if port_ok {
        Ok(())
    } else {
        Err(ProxyRefusal::Port)
    }
}

/// An address that a name from outside may lead to: not loopback, private, link-local,
/// unspecified, multicast or documentation space (so an allowed name cannot be pointed at
/// this machine or its network). `--resolve` and IP rules are trusted as written.
pub fn is_public(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// `--resolve HOST:ADDR` entries, as a map from lowercase host to address.
pub fn parse_resolve(entries: &[String]) -> Result<BTreeMap<String, IpAddr>, String> {
    let mut map = BTreeMap::new();
    for entry in entries {
        let bad = || super::messages::resolve_spelling(entry);
        let (host, addr) = entry.split_once(':').ok_or_else(bad)?;
        let addr = addr.trim_start_matches('[').trim_end_matches(']');
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        if host.is_empty() || host.parse::<IpAddr>().is_ok() {
            return Err(bad());
        }
        map.insert(host.to_ascii_lowercase(), addr);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(host: &str, wildcard: bool, port: Option<u16>) -> DomainRule {
        DomainRule {
            host: host.into(),
            wildcard,
            port,
        }
    }

    fn target(host: &str, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn a_refused_port_other_than_80_or_443_is_named_in_the_fix() {
        let ssh = target("github.com", 22);
        assert_eq!(
            ProxyRefusal::NotAllowed.fix(&ssh).as_deref(),
            Some("--net allow=github.com:22")
        );
        assert_eq!(
            ProxyRefusal::NoNetwork
                .fix(&target("github.com", 443))
                .as_deref(),
            Some("--net allow=github.com")
        );
    }

    #[test]
    fn connect_is_parsed_and_its_host_header_must_agree() {
        let r = parse(b"CONNECT Api.Example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
            .unwrap();
        assert!(r.connect);
        assert_eq!(r.target, target("api.example.com", 443));
        let r = parse(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.target, target("::1", 8443));
        assert_eq!(
            parse(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: evil.example.net:443\r\n\r\n"),
            Err(Rejected {
                target: Some(target("api.example.com", 443)),
                refusal: ProxyRefusal::HostMismatch("evil.example.net:443".into())
            })
        );
        assert!(matches!(
            parse(b"CONNECT api.example.com HTTP/1.1\r\n\r\n").map_err(|r| r.refusal),
            Err(ProxyRefusal::Malformed(_))
        ));
    }

    #[test]
    fn plain_http_is_rewritten_for_the_origin() {
        let head = b"GET http://api.example.com/v1/x?y=1 HTTP/1.1\r\nHost: api.example.com\r\nProxy-Connection: keep-alive\r\nAccept: */*\r\n\r\n";
        let r = parse(head).unwrap();
        assert!(!r.connect);
        assert_eq!(r.target, target("api.example.com", 80));
        assert_eq!(
            String::from_utf8(r.forward_head).unwrap(),
            "GET /v1/x?y=1 HTTP/1.1\r\nHost: api.example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let r =
            parse(b"GET http://a.example.com:8080 HTTP/1.0\r\nHost: a.example.com:8080\r\n\r\n")
                .unwrap();
        assert_eq!(r.target, target("a.example.com", 8080));
        assert!(r.forward_head.starts_with(b"GET / HTTP/1.0\r\n"));
    }

    #[test]
    fn plain_http_needs_a_matching_host_header() {
        assert_eq!(
            parse(b"GET http://api.example.com/ HTTP/1.1\r\nHost: evil.example.net\r\n\r\n")
                .map_err(|r| r.refusal),
            Err(ProxyRefusal::HostMismatch("evil.example.net".into()))
        );
        assert_eq!(
            parse(b"GET http://api.example.com/ HTTP/1.1\r\nHost: api.example.com:81\r\n\r\n")
                .map_err(|r| r.refusal),
            Err(ProxyRefusal::HostMismatch("api.example.com:81".into()))
        );
        for bad in [
            &b"GET http://api.example.com/ HTTP/1.1\r\n\r\n"[..],
            b"GET /relative HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
            b"GET https://api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
            b"GET http://user:pw@api.example.com/ HTTP/1.1\r\nHost: api.example.com\r\n\r\n",
            b"GET http://api.example.com/ SPDY/3\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
        ] {
            assert!(
                matches!(
                    parse(bad).map_err(|r| r.refusal),
                    Err(ProxyRefusal::Malformed(_))
                ),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn duplicate_malformed_and_spaced_host_headers_are_refused() {
        for bad in [
            &b"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\nHost: evil.example.net\r\n\r\n"[..],
            b"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com\r\nhOsT: a.example.com\r\n\r\n",
            b"CONNECT a.example.com:443 HTTP/1.1\r\nHost: a.example.com:443\r\nHost: evil.example.net:443\r\n\r\n",
            b"GET http://a.example.com/ HTTP/1.1\r\nHost : evil.example.net\r\n\r\n",
            b"GET http://a.example.com/ HTTP/1.1\r\nHost\t: a.example.com\r\n\r\n",
            b"GET http://a.example.com/ HTTP/1.1\r\nHost: a.example.com/evil\r\n\r\n",
            b"GET http://a.example.com/ HTTP/1.1\r\nHost: a.exa\x01mple.com\r\n\r\n",
            b"GET http://a.example.com/ HTTP/1.1\r\nX: \xff\r\nHost: a.example.com\r\n\r\n",
        ] {
            assert!(
                matches!(parse(bad).map_err(|r| r.refusal), Err(ProxyRefusal::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_head_ends_at_its_blank_line_or_where_it_went_wrong() {
        assert_eq!(head_end(b"CONNECT a:443 HTTP/1.1\r\n"), None);
        assert_eq!(head_end(b"CONNECT a:443 HTTP/1.1\r\n\r\nrest"), Some(26));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nBad Name: x\r\n"), Some(29));
    }

    #[test]
    fn the_allow_list_matches_names_wildcards_ports_and_ip_literals() {
        let rules = [
            rule("api.example.com", false, None),
            rule("example.org", true, None),
            rule("git.example.net", false, Some(22)),
            rule("192.0.2.7", false, Some(8443)),
        ];
        assert_eq!(check(&rules, &target("api.example.com", 443)), Ok(()));
        assert_eq!(check(&rules, &target("api.example.com", 80)), Ok(()));
        assert_eq!(
            check(&rules, &target("api.example.com", 8080)),
            Err(ProxyRefusal::Port)
        );
        assert_eq!(check(&rules, &target("cdn.example.org", 443)), Ok(()));
        assert_eq!(check(&rules, &target("a.b.example.org", 443)), Ok(()));
        assert_eq!(
            check(&rules, &target("example.org", 443)),
            Err(ProxyRefusal::NotAllowed)
        );
        assert_eq!(
            check(&rules, &target("badexample.org", 443)),
            Err(ProxyRefusal::NotAllowed)
        );
        assert_eq!(check(&rules, &target("git.example.net", 22)), Ok(()));
        assert_eq!(
            check(&rules, &target("git.example.net", 443)),
            Err(ProxyRefusal::Port)
        );
        assert_eq!(check(&rules, &target("192.0.2.7", 8443)), Ok(()));
        assert_eq!(
            check(&rules, &target("192.0.2.8", 443)),
            Err(ProxyRefusal::IpLiteral)
        );
        assert_eq!(
            check(&rules, &target("::1", 443)),
            Err(ProxyRefusal::IpLiteral)
        );
        assert_eq!(
            check(&rules, &target("api.example.com.evil.net", 443)),
            Err(ProxyRefusal::NotAllowed)
        );
    }

    #[test]
    fn only_public_addresses_count_for_names() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["1.1.1.1", "160.79.104.10", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn resolve_overrides_take_host_and_address() {
        let map = parse_resolve(&[
            "API.example.com:127.0.0.1".into(),
            "v6.example.com:[::1]".into(),
        ])
        .unwrap();
        assert_eq!(
            map["api.example.com"],
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(map["v6.example.com"], "::1".parse::<IpAddr>().unwrap());
        for bad in [
            "api.example.com",
            "api.example.com:nowhere",
            ":1.2.3.4",
            "1.2.3.4:5.6.7.8",
        ] {
            assert!(
                parse_resolve(&[bad.into()]).unwrap_err().contains("Hint:"),
                "{bad}"
            );
        }
    }
}
