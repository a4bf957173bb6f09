//! npm's tarballs the project's lockfile names, found in the host's npm cache, where no
//! overlay layers that cache beneath the private one (Landlock alone, macOS). Pure: which
//! lockfile npm reads, which tarballs it names, where npm keeps each.
//!
//! npm keeps a tarball under the hash of its content (`_cacache/content-v2/sha512/ab/cd/…`,
//! `cacache`), and `npm ci` reads a locked package's tarball by that hash alone, checking
//! what it reads against it. So a link, in the private cache, to the host's file at that
//! hash lets `npm ci --offline` install what the host downloaded: the program reads it
//! through the link (it has no rule that writes the host's cache), and anything else at that
//! hash would fail npm's check. Looking up the lockfile's entries costs what the lockfile
//! holds, never what the host's cache holds.

use std::path::{Path, PathBuf};

/// The lockfiles npm reads, in the order it prefers them.
pub const LOCKFILES: &[&str] = &["npm-shrinkwrap.json", "package-lock.json"];

/// Where the content-addressed tarballs lie in an npm cache directory.
pub const CONTENT: &str = "_cacache/content-v2/sha512";

/// The largest lockfile read (a monorepo's is a few MB).
pub const LOCKFILE_LIMIT: u64 = 64 << 20;

/// The most tarballs looked up at one start: more than the largest projects lock, so that
/// a lockfile a session wrote cannot make every later start slow.
pub const MOST: usize = 50_000;

/// The lockfile of the project npm works on from `cwd`: the nearest directory, from `cwd`
/// up to and including `workspace` (only `cwd` when it lies outside), that holds one.
pub fn lockfile(cwd: &Path, workspace: &Path, exists: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let top = if cwd.starts_with(workspace) {
        workspace
    } else {
        cwd
    };
    for dir in cwd.ancestors() {
        if let Some(found) = LOCKFILES.iter().map(|n| dir.join(n)).find(|p| exists(p)) {
            return Some(found);
        }
        if dir == top {
            break;
        }
    }
    None
}

/// Each tarball the lockfile's text names by a SHA-512 integrity (`"integrity":
/// "sha512-…"`, lockfile versions 1 to 3), as its path below `CONTENT`, once each, at most
/// `MOST`. The text is scanned, not parsed: an entry is named only by that key, and a path
/// is made only from a well-formed hash.
pub fn tarballs(text: &[u8]) -> Vec<PathBuf> {
    let key = b"\"integrity\"";
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<PathBuf> = Vec::new();
    for at in memchr::memmem::find_iter(text, key) {
        let rest = skip_space(&text[at + key.len()..]);
        let Some(rest) = rest.strip_prefix(b":") else {
            continue;
        };
        let Some(rest) = skip_space(rest).strip_prefix(b"\"") else {
            continue;
        };
        let Some(end) = memchr::memchr(b'"', rest) else {
            continue;
        };
        // An integrity may list several hashes, separated by spaces.
        for hash in rest[..end].split(|b| b.is_ascii_whitespace()) {
            if let Some(path) = content_path(hash) {
                if out.len() == MOST {
                    return out;
                }
                if seen.insert(path.clone()) {
                    out.push(path);
                }
            }
        }
    }
    out
}

/// `sha512-BASE64` (options after `?` ignored) as npm's path for it below `CONTENT`:
/// `ab/cd/` and the rest of the digest in hex.
pub fn content_path(integrity: &[u8]) -> Option<PathBuf> {
    use base64ct::Encoding;
    let digest = integrity.strip_prefix(b"sha512-")?;
    let digest = digest.split(|b| *b == b'?').next()?;
    let text = std::str::from_utf8(digest).ok()?;
    let bytes = base64ct::Base64::decode_vec(text).ok()?;
    if bytes.len() != 64 {
        return None;
    }
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let hex: String = bytes
        .iter()
        .flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]])
        .map(char::from)
        .collect();
    Some(Path::new(&hex[..2]).join(&hex[2..4]).join(&hex[4..]))
}

fn skip_space(text: &[u8]) -> &[u8] {
    let n = text.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &text[n..]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integrity npm wrote for a real tarball, and where npm put that tarball.
    const INTEGRITY: &str =
        "sha512-l37IOsdqJPhy84ksg1Ei5oCbqqmaXozn02xSDkEVSsXw4rPifUHUxq4NEsoMR9y7BbAdXTuQQPhH94sHink2aw==";
    const STORED: &str = "97/7e/c83ac76a24f872f3892c835122e6809baaa99a5e8ce7d36c520e41154ac5f0e2b3e27d41d4c6ae0d12ca0c47dcbb05b01d5d3b9040f847f78b078a79366b";

    #[test]
    fn an_integrity_names_the_path_npm_stores_its_tarball_at() {
        assert_eq!(
            content_path(INTEGRITY.as_bytes()),
            Some(PathBuf::from(STORED))
        );
        let with_options = format!("{INTEGRITY}?foo");
        assert_eq!(
            content_path(with_options.as_bytes()),
            Some(PathBuf::from(STORED))
        );
        // Other algorithms, short digests and bad text name nothing.
        assert_eq!(content_path(b"sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk="), None);
        assert_eq!(content_path(b"sha512-AAAA"), None);
        assert_eq!(content_path(b"sha512-../../../etc/passwd"), None);
        assert_eq!(content_path(b""), None);
    }

    #[test]
    fn every_lockfile_version_names_its_tarballs_once() {
        let v3 = format!(
            r#"{{"lockfileVersion": 3, "packages": {{"": {{"name": "p"}},
            "node_modules/tiny": {{"version": "1.0.0", "integrity": "{INTEGRITY}"}},
            "node_modules/a/node_modules/tiny": {{"integrity" :
              "sha1-2jmj7l5rSw0yVb/vlWAYkK/YBwk= {INTEGRITY}"}}}}}}"#
        );
        assert_eq!(tarballs(v3.as_bytes()), vec![PathBuf::from(STORED)]);
        let v1 = format!(
            r#"{{"lockfileVersion": 1, "dependencies": {{"tiny": {{"version": "1.0.0",
            "integrity": "{INTEGRITY}", "dependencies": {{"x": {{"integrity": "sha512-AAAA"}}}}}}}}}}"#
        );
        assert_eq!(tarballs(v1.as_bytes()), vec![PathBuf::from(STORED)]);
        // Cut short, or with the key as a value: nothing, and no panic.
        assert!(tarballs(b"{\"integrity\"").is_empty());
        assert!(tarballs(b"{\"integrity\": \"sha512-").is_empty());
        assert!(tarballs(b"[\"integrity\", 1]").is_empty());
    }

    #[test]
    fn the_nearest_lockfile_from_the_working_directory_up_to_the_workspace() {
        let has =
            |set: &'static [&'static str]| move |p: &Path| set.iter().any(|s| p == Path::new(s));
        let ws = Path::new("/w");
        let cwd = Path::new("/w/app/src");
        assert_eq!(
            lockfile(
                cwd,
                ws,
                &has(&["/w/package-lock.json", "/w/app/package-lock.json"])
            ),
            Some("/w/app/package-lock.json".into())
        );
        assert_eq!(
            lockfile(
                cwd,
                ws,
                &has(&["/w/package-lock.json", "/w/npm-shrinkwrap.json"])
            ),
            Some("/w/npm-shrinkwrap.json".into())
        );
        // Never above the workspace; outside it, only the working directory.
        assert_eq!(lockfile(cwd, ws, &has(&["/package-lock.json"])), None);
        let outside = Path::new("/o/p");
        assert_eq!(lockfile(outside, ws, &has(&["/o/package-lock.json"])), None);
        assert_eq!(
            lockfile(outside, ws, &has(&["/o/p/package-lock.json"])),
            Some("/o/p/package-lock.json".into())
        );
    }
}
