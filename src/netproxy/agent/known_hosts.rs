//! The host keys a `known_hosts` file lists for a host, as OpenSSH matches them: plain
//! patterns (`*`, `?`, `!` negation, comma lists), hashed names (`|1|salt|hash`,
//! HMAC-SHA1), `[host]:port` for a port other than 22; `@revoked` keys are left out,
//! `@cert-authority` lines too (a certificate's host key is not bound by name here).
//! Pure: the text comes in.

use base64ct::{Base64, Encoding};
use hmac::{Hmac, Mac};

/// How OpenSSH spells a host in `known_hosts`: `host`, or `[host]:port` off port 22.
pub fn spelling(host: &str, port: Option<u16>) -> String {
    match port {
        None | Some(22) => host.to_ascii_lowercase(),
        Some(p) => format!("[{}]:{p}", host.to_ascii_lowercase()),
    }
}

/// The key blobs `text` lists for `name` (as `spelling` gives it), revoked ones left out.
pub fn keys_for(text: &str, name: &str) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    let mut revoked = Vec::new();
    for line in text.lines() {
        let Some(entry) = parse_line(line) else {
            continue;
        };
        match entry.marker {
            Marker::None if matches(entry.hosts, name) => keys.push(entry.key),
            Marker::Revoked => revoked.push(entry.key),
            _ => {}
        }
    }
    keys.retain(|k| !revoked.contains(k));
    keys
}

/// Each key with the names listed in plain (unhashed, no pattern) for it: to say which
/// host a key is.
pub fn named(text: &str) -> Vec<(Vec<u8>, Vec<String>)> {
    text.lines()
        .filter_map(parse_line)
        .filter(|e| e.marker == Marker::None && !e.hosts.starts_with('|'))
        .map(|e| {
            let names = e
                .hosts
                .split(',')
                .filter(|p| !p.starts_with('!') && !p.contains(['*', '?']))
                .map(str::to_string)
                .collect();
            (e.key, names)
        })
        .collect()
}

/// The other ports `text` lists `host` on in plain (`[host]:2224`): where a key for the
/// host on port 22 is not found, the port the user may have meant.
pub fn other_ports(text: &str, host: &str) -> Vec<u16> {
    let prefix = format!("[{}]:", host.to_ascii_lowercase());
    let mut ports: Vec<u16> = named(text)
        .into_iter()
        .flat_map(|(_, names)| names)
        .filter_map(|n| n.to_ascii_lowercase().strip_prefix(&prefix)?.parse().ok())
        .filter(|p| *p != 22)
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[derive(Debug, PartialEq, Eq)]
enum Marker {
    None,
    Revoked,
    CertAuthority,
}

struct Line<'a> {
    marker: Marker,
    hosts: &'a str,
    key: Vec<u8>,
}

fn parse_line(line: &str) -> Option<Line<'_>> {
    let mut words = line.split_whitespace();
    let mut first = words.next()?;
    if first.starts_with('#') {
        return None;
    }
    let marker = match first {
        "@revoked" => Marker::Revoked,
        "@cert-authority" => Marker::CertAuthority,
        _ if first.starts_with('@') => return None,
        _ => Marker::None,
    };
    if marker != Marker::None {
        first = words.next()?;
    }
    let (_kind, encoded) = (words.next()?, words.next()?);
    Some(Line {
        marker,
        hosts: first,
        key: Base64::decode_vec(encoded).ok()?,
    })
}

/// Whether the host field `hosts` names `name`: a hashed name by its HMAC, else a
/// comma list where one pattern matches and no negated one does.
fn matches(hosts: &str, name: &str) -> bool {
    if let Some(hashed) = hosts.strip_prefix("|1|") {
        let Some((salt, hash)) = hashed.split_once('|') else {
            return false;
        };
        let (Ok(salt), Ok(hash)) = (Base64::decode_vec(salt), Base64::decode_vec(hash)) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(&salt) else {
            return false;
        };
        mac.update(name.as_bytes());
        return mac.verify_slice(&hash).is_ok();
    }
    let mut found = false;
    for pattern in hosts.split(',') {
        match pattern.strip_prefix('!') {
            Some(negated) if wildcard(&negated.to_ascii_lowercase(), name) => return false,
            Some(_) => {}
            None => found |= wildcard(&pattern.to_ascii_lowercase(), name),
        }
    }
    found
}

/// OpenSSH's `match_pattern`: `*` any run, `?` any one character.
fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    const B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIAEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEB";

    fn blob(b64: &str) -> Vec<u8> {
        Base64::decode_vec(b64).unwrap()
    }

    fn hashed(name: &str, salt: &[u8]) -> String {
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(salt).unwrap();
        mac.update(name.as_bytes());
        format!(
            "|1|{}|{}",
            Base64::encode_string(salt),
            Base64::encode_string(&mac.finalize().into_bytes())
        )
    }

    #[test]
    fn spellings_follow_openssh() {
        assert_eq!(spelling("GitHub.com", None), "github.com");
        assert_eq!(spelling("h", Some(22)), "h");
        assert_eq!(spelling("h", Some(2222)), "[h]:2222");
    }

    #[test]
    fn plain_patterns_hashes_and_negation() {
        let text = format!(
            "# comment\n\ngithub.com,140.82.1.1 ssh-ed25519 {A}\n*.example.org,!bad.example.org ssh-ed25519 {B}\n{} ssh-ed25519 {B}\n[h]:2222 ssh-ed25519 {A}\n",
            hashed("secret.host", b"0123456789abcdefghij")
        );
        assert_eq!(keys_for(&text, "github.com"), vec![blob(A)]);
        assert_eq!(keys_for(&text, "a.example.org"), vec![blob(B)]);
        assert!(keys_for(&text, "bad.example.org").is_empty());
        assert_eq!(keys_for(&text, "secret.host"), vec![blob(B)]);
        assert!(keys_for(&text, "other.host").is_empty());
        assert_eq!(keys_for(&text, "[h]:2222"), vec![blob(A)]);
        assert!(keys_for(&text, "h").is_empty());
        let more = format!("{text}[H]:2224,[h]:22 ssh-ed25519 {B}\n[hx]:9 ssh-ed25519 {B}\n");
        assert_eq!(other_ports(&more, "h"), vec![2222, 2224]);
        assert!(other_ports(&more, "github.com").is_empty());
        let named = named(&text);
        assert_eq!(
            named[0],
            (blob(A), vec!["github.com".into(), "140.82.1.1".into()])
        );
        assert_eq!(named.len(), 3, "the hashed entry has no name to show");
    }

    #[test]
    fn revoked_and_certificate_authority_keys_are_never_a_hosts_key() {
        let text = format!(
            "h ssh-ed25519 {A}\n@revoked * ssh-ed25519 {A}\n@cert-authority h ssh-ed25519 {B}\n@other h ssh-ed25519 {B}\n"
        );
        assert!(keys_for(&text, "h").is_empty());
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("*", "x"));
        assert!(wildcard("a*c", "abbbc"));
        assert!(wildcard("a?c", "abc"));
        assert!(!wildcard("a?c", "ac"));
        assert!(!wildcard("*.org", "org"));
    }
}
