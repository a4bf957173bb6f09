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
pub const RESOLV_CONF: &str = "# sbx-shell: this session has no network of its own. Names are refused at once\n# and listed at the end of the session with the option that allows them.\nnameserver 127.0.0.1\noptions attempts:1\n";

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
}
