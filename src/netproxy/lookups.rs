//! The sandbox's name server (bwrap, no network or an allow-list): a DNS query that reaches
//! it is answered at once with REFUSED, and the name asked is handed to the proxy, which
//! counts it with the refusals (`Proxy::serve_lookups_from_sandbox`). Pure: reading the
//! question of a query and writing the answer.
//!
//! Inside bwrap's network namespace nothing but the loopback exists, so a lookup to the
//! host's name server fails at once anyway (`ENETUNREACH`); this makes it a refusal that
//! sbx-shell sees and names at the end of the session with the option that allows it.
//! `resolv.conf` is pointed here (`RESOLV_CONF`); the answer REFUSED makes glibc's resolver
//! give up without waiting ("Temporary failure in name resolution", EAI_AGAIN).

/// What the sandbox's `/etc/resolv.conf` says: this server, asked once.
pub const RESOLV_CONF: &str =
    "# sbx-shell: this session has no network of its own. Names are refused at once\n# and \
    listed at the end of the session with the option that allows them.\nnameserver \
    127.0.0.1\noptions attempts:1\n";

/// The longest query read (a question is at most 255 bytes of name; EDNS adds a little).
pub const MAX_QUERY: usize = 1232;

/// The DNS header's length.
const HEADER: usize = 12;
/// RCODE REFUSED.
const REFUSED: u8 = 5;

/// The question of a query: the name (lowercase, dotted, no final dot) and where the
/// question section ends. `None` for anything but a standard query with one question.
pub fn question(packet: &[u8]) -> Option<(String, usize)> {
    let header = packet.get(..HEADER)?;
    let is_query = header[2] & 0x80 == 0;
    let opcode = (header[2] >> 3) & 0x0f;
    let questions = u16::from_be_bytes([header[4], header[5]]);
    if !is_query || opcode != 0 || questions != 1 {
        return None;
    }
    let mut at = HEADER;
    let mut labels: Vec<String> = Vec::new();
    loop {
        let len = usize::from(*packet.get(at)?);
        at += 1;
        if len == 0 {
            break;
        }
        // A compression pointer (0xc0) has no place in a question; a longer label is invalid.
        if len > 63 {
            return None;
        }
        let label = packet.get(at..at + len)?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len;
    }
    // QTYPE and QCLASS.
    packet.get(at..at + 4)?;
    let name = labels.join(".");
    (name.len() <= 253).then_some((name, at + 4))
}

/// The answer to `query`: its id, opcode and recursion-desired bit, REFUSED, and its
/// question again (resolvers match the answer to the question); `None` when `query` is
/// not one (`question`).
pub fn refused(query: &[u8]) -> Option<Vec<u8>> {
    let (_, end) = question(query)?;
    let mut answer = query.get(..end)?.to_vec();
    // QR set; opcode and RD kept; AA and TC clear.
    answer[2] = 0x80 | (query[2] & 0x79);
    // RA clear, Z clear, RCODE REFUSED.
    answer[3] = REFUSED;
    // One question, no answer, authority or additional records (the query's EDNS record
    // is left out with the rest of it).
    answer[4..HEADER].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    Some(answer)
}

/// Whether a name is one that an allow-list entry could name: a reverse lookup
/// (`…in-addr.arpa`, `…ip6.arpa`) or a single label (`localhost`, a search-list try) is not.
pub fn is_host_name(name: &str) -> bool {
    name.contains('.') && !name.ends_with(".arpa")
}

/// Landlock alone, where no name server of sbx-shell's can be put in the program's way:
/// glibc asks the name service cache daemon first, at these paths (`_PATH_NSCDSOCKET`),
/// and the guard connects the program there to sbx-shell instead (`mediator::Scope::lookups`).
pub const NAME_SERVICE_SOCKETS: [&[u8]; 2] = [b"/var/run/nscd/socket", b"/run/nscd/socket"];

/// The request header of that protocol: version, type and key length, native `i32`s.
pub const NSCD_HEADER: usize = 12;
/// The longest key read (glibc's MAXKEYLEN).
pub const NSCD_MAX_KEY: usize = 1024;
const NSCD_VERSION: i32 = 2;
const GETHOSTBYNAME: i32 = 4;
const GETHOSTBYNAMEV6: i32 = 5;
const GETAI: i32 = 14;
/// h_errno's HOST_NOT_FOUND.
const HOST_NOT_FOUND: i32 = 1;

/// What a name service request asks: a host name (`getaddrinfo`: GETAI; `gethostbyname`),
/// or anything else (users, groups, services, addresses, the cache's shared memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The name, and whether the request is GETAI (else gethostbyname's).
    Host {
        name: String,
        getai: bool,
    },
    Other,
}

/// The key length a request header announces (`None`: not this protocol's version, or too
/// long).
pub fn nscd_key_len(header: &[u8; NSCD_HEADER]) -> Option<usize> {
    let word =
        |i: usize| i32::from_ne_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    let len = usize::try_from(word(8)).ok()?;
    (word(0) == NSCD_VERSION && len <= NSCD_MAX_KEY).then_some(len)
}

/// What a request (its header and key) asks.
pub fn nscd_asked(header: &[u8; NSCD_HEADER], key: &[u8]) -> Asked {
    let kind = i32::from_ne_bytes([header[4], header[5], header[6], header[7]]);
    let name = key.split(|b| *b == 0).next().unwrap_or_default();
    match kind {
        GETAI | GETHOSTBYNAME | GETHOSTBYNAMEV6 if !name.is_empty() => Asked::Host {
            name: String::from_utf8_lossy(name)
                .trim_end_matches('.')
                .to_ascii_lowercase(),
            getai: kind == GETAI,
        },
        _ => Asked::Other,
    }
}

/// The answer "no such host" to a host request: GETAI's header (six `i32`s: version,
/// found, naddrs, addrslen, canonlen, error) or gethostbyname's (eight: version, found,
/// name length, aliases, type, length, addresses, error); glibc then fails the lookup at
/// once (EAI_NONAME) without asking anyone else.
pub fn nscd_not_found(getai: bool) -> Vec<u8> {
    let words: &[i32] = if getai {
        &[NSCD_VERSION, 0, 0, 0, 0, HOST_NOT_FOUND]
    } else {
        &[NSCD_VERSION, 0, 0, 0, 0, 0, 0, HOST_NOT_FOUND]
    };
    words.iter().flat_map(|w| w.to_ne_bytes()).collect()
}

/// GETAI's answer for a name the host's own `hosts` file gives `addrs`: the header, then
/// the addresses, their families (one byte each) and the name itself as the canonical one.
pub fn nscd_found(name: &str, addrs: &[std::net::IpAddr]) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut families = Vec::new();
    for addr in addrs {
        match addr {
            std::net::IpAddr::V4(v4) => {
                raw.extend_from_slice(&v4.octets());
                families.push(libc::AF_INET as u8);
            }
            std::net::IpAddr::V6(v6) => {
                raw.extend_from_slice(&v6.octets());
                families.push(libc::AF_INET6 as u8);
            }
        }
    }
    let canon_len = name.len() + 1;
    let header: [i32; 6] = [
        NSCD_VERSION,
        1,
        addrs.len() as i32,
        raw.len() as i32,
        canon_len as i32,
        0,
    ];
    let mut out: Vec<u8> = header.iter().flat_map(|w| w.to_ne_bytes()).collect();
    out.extend_from_slice(&raw);
    out.extend_from_slice(&families);
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    out
}

/// The addresses the `hosts` file `text` gives `name` (names compared without case).
pub fn in_hosts_file(text: &str, name: &str) -> Vec<std::net::IpAddr> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next().unwrap_or_default();
            let mut words = line.split_whitespace();
            let addr: std::net::IpAddr = words.next()?.parse().ok()?;
            words.any(|w| w.eq_ignore_ascii_case(name)).then_some(addr)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query as glibc sends it: id 0x1234, RD, one question for `name`, type A, class IN,
    /// and an EDNS record when `edns`.
    fn query(name: &str, edns: bool) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, u8::from(edns)];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        if edns {
            q.extend_from_slice(&[0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        }
        q
    }

    #[test]
    fn the_question_is_read_as_asked() {
        let q = query("Registry.NPMJS.org", true);
        let (name, end) = question(&q).unwrap();
        assert_eq!(name, "registry.npmjs.org");
        assert_eq!(end, q.len() - 11);
        // Not a standard query with one question: nothing.
        let mut answer = q.clone();
        answer[2] |= 0x80;
        assert_eq!(question(&answer), None, "an answer");
        let mut update = q.clone();
        update[2] = 5 << 3;
        assert_eq!(question(&update), None, "an update");
        let mut two = q.clone();
        two[5] = 2;
        assert_eq!(question(&two), None);
        // Cut short, a pointer in the name, a label running past the end.
        assert_eq!(question(&q[..20]), None);
        assert_eq!(question(&q[..HEADER]), None);
        let mut pointer = query("a.b", false);
        pointer[HEADER] = 0xc0;
        assert_eq!(question(&pointer), None);
        let mut long = query("a.b", false);
        long[HEADER] = 60;
        assert_eq!(question(&long), None);
    }

    #[test]
    fn the_answer_is_refused_for_the_same_question() {
        let q = query("pypi.org", true);
        let a = refused(&q).unwrap();
        assert_eq!(&a[..2], &[0x12, 0x34], "same id");
        assert_eq!(a[2], 0x81, "an answer, recursion desired as asked");
        assert_eq!(a[3], 5, "REFUSED, recursion not available");
        assert_eq!(&a[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            &a[12..],
            &q[12..q.len() - 11],
            "the question, no EDNS record"
        );
        assert_eq!(question(&a), None, "an answer is not a query");
        assert_eq!(refused(&[0; 5]), None);
    }

    #[test]
    fn reverse_lookups_and_single_labels_are_not_hosts_to_allow() {
        assert!(is_host_name("github.com"));
        assert!(!is_host_name("1.0.0.127.in-addr.arpa"));
        assert!(!is_host_name("localhost"));
    }

    fn nscd_request(kind: i32, key: &[u8]) -> ([u8; NSCD_HEADER], Vec<u8>) {
        let mut header = [0u8; NSCD_HEADER];
        header[..4].copy_from_slice(&2i32.to_ne_bytes());
        header[4..8].copy_from_slice(&kind.to_ne_bytes());
        header[8..].copy_from_slice(&(key.len() as i32).to_ne_bytes());
        (header, key.to_vec())
    }

    #[test]
    fn name_service_requests_are_read_as_glibc_sends_them() {
        let (h, k) = nscd_request(14, b"Registry.npmjs.org\0");
        assert_eq!(nscd_key_len(&h), Some(19));
        assert_eq!(
            nscd_asked(&h, &k),
            Asked::Host {
                name: "registry.npmjs.org".into(),
                getai: true
            }
        );
        let (h, k) = nscd_request(4, b"pypi.org.\0");
        assert_eq!(
            nscd_asked(&h, &k),
            Asked::Host {
                name: "pypi.org".into(),
                getai: false
            }
        );
        // A user, the hosts cache's shared memory (GETFDHST), an address: not a name.
        for kind in [0, 13, 6] {
            let (h, k) = nscd_request(kind, b"root\0");
            assert_eq!(nscd_asked(&h, &k), Asked::Other, "{kind}");
        }
        let (mut h, _) = nscd_request(14, &[0; 2000]);
        assert_eq!(nscd_key_len(&h), None, "too long");
        h[..4].copy_from_slice(&3i32.to_ne_bytes());
        assert_eq!(nscd_key_len(&h), None, "another version");
    }

    #[test]
    fn answers_have_glibcs_layout() {
        let words = |b: &[u8]| -> Vec<i32> {
            b.chunks(4)
                .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
                .collect()
        };
        assert_eq!(words(&nscd_not_found(true)), [2, 0, 0, 0, 0, 1]);
        assert_eq!(words(&nscd_not_found(false)), [2, 0, 0, 0, 0, 0, 0, 1]);
        let found = nscd_found(
            "mirror.test",
            &["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()],
        );
        assert_eq!(words(&found[..24]), [2, 1, 2, 20, 12, 0]);
        assert_eq!(&found[24..28], &[127, 0, 0, 1]);
        assert_eq!(&found[44..46], &[2, 10], "families");
        assert_eq!(&found[46..], b"mirror.test\0");
    }

    #[test]
    fn the_hosts_file_is_read_as_glibc_reads_it() {
        let text = "127.0.0.1 localhost\n::1 localhost ip6-localhost # comment\n# 10.0.0.1 localhost\n10.1.2.3\tMirror.Corp.test mirror\nbad line\n";
        assert_eq!(in_hosts_file(text, "localhost").len(), 2);
        assert_eq!(
            in_hosts_file(text, "mirror.corp.test"),
            ["10.1.2.3".parse::<std::net::IpAddr>().unwrap()]
        );
        assert!(in_hosts_file(text, "pypi.org").is_empty());
    }
}
