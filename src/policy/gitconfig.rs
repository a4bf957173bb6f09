//! git's configuration language as git itself reads it, and which keys a sandboxed program
//! may write into a repository's config (pure).
//!
//! The rule is an allow-list: a session may write the keys that ordinary git work writes —
//! `init`, `clone`, `remote add`, `fetch`, branches and their upstreams, user identity,
//! sparse checkouts, submodules — and nothing else. Every other key is refused, whether or
//! not it is known to run a program: the keys that do (`core.fsmonitor`, `pager.*`,
//! `remote.*.uploadpack`, `filter.*`, `include.path` …) are a list that keeps growing,
//! while what git writes by itself is small and stable. Values are checked where an
//! allowed key can still run something: a URL that names the `ext::` or `fd::` transport,
//! any `<helper>::` transport, or starts with `-` (an option to ssh or upload-pack).
//!
//! The parser follows git's grammar (`config.c`): a UTF-8 BOM, `#`/`;` comments, section
//! headers `[section]`, `[section "subsection"]` (with `\` escapes) and the old
//! `[section.subsection]`, keys on the header's own line, keys without `=` (true),
//! quoting, the `\n` `\t` `\b` `\\` `\"` escapes, line continuations, `\r\n`, and
//! case: sections and key names are lower-cased, subsections kept. It reads bytes, not
//! text. A file git cannot parse is refused as a whole: git would refuse to run in it, and
//! a reader that disagreed with git would be the hole. `git config --list` is its oracle
//! in the tests (a differential fuzz on generated and mutated files).

/// One `key = value` as git reads it: `key` is `section[.subsection].name` with the
/// section and name lower-cased (git's `--list` spelling); `value` is `None` for a key
/// without `=` (git's boolean true).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// Where a config stops being parsable, as git reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad config line {}", self.line)
    }
}

/// git's `isspace` (its own ctype: tab, newline, carriage return, space; not \v or \f).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

/// A character of a section or key name.
fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

/// The bytes of a config, one character at a time as git reads them: `\r\n` is one `\n`,
/// and the end of the text reads as a `\n` (with `eof` set).
struct ConfigReader<'a> {
    text: &'a [u8],
    at: usize,
    eof: bool,
    line: usize,
}

impl ConfigReader<'_> {
    fn next(&mut self) -> u8 {
        let Some(&c) = self.text.get(self.at) else {
            self.eof = true;
            return b'\n';
        };
        self.at += 1;
        if c == b'\r' && self.text.get(self.at) == Some(&b'\n') {
            self.at += 1;
            self.line += 1;
            return b'\n';
        }
        if c == b'\n' {
            self.line += 1;
        }
        c
    }

    fn error(&self) -> ParseError {
        ParseError {
            line: self.line + 1,
        }
    }
}

/// Every entry of a config, in order, or where git would stop reading it.
pub fn parse(text: &[u8]) -> Result<Vec<ConfigEntry>, ParseError> {
    let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
    let mut r = ConfigReader {
        text,
        at: 0,
        eof: false,
        line: 0,
    };
    let mut out = Vec::new();
    let mut section: Vec<u8> = Vec::new();
    let mut comment = false;
    loop {
        let c = r.next();
        if c == b'\n' {
            if r.eof {
                return Ok(out);
            }
            comment = false;
            continue;
        }
        if comment || is_space(c) {
            continue;
        }
        if c == b'#' || c == b';' {
            comment = true;
            continue;
        }
        if c == b'[' {
            section = section_header(&mut r)?;
            if section.is_empty() {
                return Err(r.error());
            }
            continue;
        }
        if !c.is_ascii_alphabetic() {
            return Err(r.error());
        }
        let mut entry = key_and_value(&mut r, &section, c)?;
        // git hands keys and values on as C strings: what follows a NUL is not read.
        cut_at_nul(&mut entry.key);
        if let Some(v) = &mut entry.value {
            cut_at_nul(v);
        }
        out.push(entry);
    }
}

fn cut_at_nul(bytes: &mut Vec<u8>) {
    if let Some(at) = bytes.iter().position(|b| *b == 0) {
        bytes.truncate(at);
    }
}

/// After `[`: the section's name (lower-cased) and its subsection, through `]`.
fn section_header(r: &mut ConfigReader<'_>) -> Result<Vec<u8>, ParseError> {
    let mut name = Vec::new();
    loop {
        let c = r.next();
        if r.eof {
            return Err(r.error());
        }
        match c {
            b']' => return Ok(name),
            c if is_space(c) => return subsection(r, name, c),
            c if is_key_char(c) || c == b'.' => name.push(c.to_ascii_lowercase()),
            _ => return Err(r.error()),
        }
    }
}

/// `[section "subsection"]` after the section's name: spaces, a quoted subsection (kept
/// as written, `\` taking the next character as it is), then `]`.
fn subsection(
    r: &mut ConfigReader<'_>,
    mut name: Vec<u8>,
    first: u8,
) -> Result<Vec<u8>, ParseError> {
    let mut c = first;
    while is_space(c) {
        if c == b'\n' {
            return Err(r.error());
        }
        c = r.next();
    }
    if c != b'"' {
        return Err(r.error());
    }
    name.push(b'.');
    loop {
        let mut c = r.next();
        if c == b'\n' {
            return Err(r.error());
        }
        if c == b'"' {
            break;
        }
        if c == b'\\' {
            c = r.next();
            if c == b'\n' {
                return Err(r.error());
            }
        }
        name.push(c);
    }
    if r.next() != b']' {
        return Err(r.error());
    }
    Ok(name)
}

/// A key whose first letter is `first`, and its value through the end of its line.
fn key_and_value(
    r: &mut ConfigReader<'_>,
    section: &[u8],
    first: u8,
) -> Result<ConfigEntry, ParseError> {
    let mut key = section.to_vec();
    if !key.is_empty() {
        key.push(b'.');
    }
    key.push(first.to_ascii_lowercase());
    let mut c;
    loop {
        c = r.next();
        if r.eof || !is_key_char(c) {
            break;
        }
        key.push(c.to_ascii_lowercase());
    }
    while c == b' ' || c == b'\t' {
        c = r.next();
    }
    if c == b'\n' {
        return Ok(ConfigEntry { key, value: None });
    }
    if c != b'=' {
        return Err(r.error());
    }
    let value = value(r)?;
    Ok(ConfigEntry {
        key,
        value: Some(value),
    })
}

/// A value after `=`: spaces around it trimmed (not inside quotes), `#`/`;` outside quotes
/// start a comment, `\` escapes or continues the line.
fn value(r: &mut ConfigReader<'_>) -> Result<Vec<u8>, ParseError> {
    let mut out = Vec::new();
    let (mut quote, mut comment) = (false, false);
    // Where trailing unquoted spaces began (0: none pending).
    let mut trim = 0;
    loop {
        let mut c = r.next();
        if c == b'\n' {
            if quote {
                return Err(r.error());
            }
            if trim > 0 {
                out.truncate(trim);
            }
            return Ok(out);
        }
        if comment {
            continue;
        }
        if is_space(c) && !quote {
            if trim == 0 {
                trim = out.len();
            }
            if !out.is_empty() {
                out.push(c);
            }
            continue;
        }
        if !quote && (c == b';' || c == b'#') {
            comment = true;
            continue;
        }
        trim = 0;
        if c == b'\\' {
            c = r.next();
            c = match c {
                b'\n' => continue,
                b't' => b'\t',
                b'b' => 0x08,
                b'n' => b'\n',
                b'\\' | b'"' => c,
                _ => return Err(r.error()),
            };
            out.push(c);
            continue;
        }
        if c == b'"' {
            quote = !quote;
            continue;
        }
        out.push(c);
    }
}

/// A key's section, subsection and name.
type Parts<'a> = (&'a [u8], Option<&'a [u8]>, &'a [u8]);

/// A key split as git splits it: the section (before the first dot), the subsection
/// (between the first and the last dot, if any) and the name (after the last dot).
fn split(key: &[u8]) -> Option<Parts<'_>> {
    let first = key.iter().position(|c| *c == b'.')?;
    let last = key.iter().rposition(|c| *c == b'.')?;
    let sub = (first != last).then(|| &key[first + 1..last]);
    Some((&key[..first], sub, &key[last + 1..]))
}

/// The keys a session may write into any repository's config without being asked: what
/// ordinary git work writes. `*` as the subsection is any subsection; `*` as the name is
/// any name (only for sections that hold no commands).
pub const ALLOWED: &[&str] = &[
    // git init, clone, and the repository's format
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.symlinks",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.worktree",
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.quotepath",
    "core.untrackedcache",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "index.sparse",
    "extensions.objectformat",
    "extensions.compatobjectformat",
    "extensions.refstorage",
    "extensions.worktreeconfig",
    "extensions.partialclone",
    "extensions.preciousobjects",
    "lfs.repositoryformatversion",
    "init.defaultbranch",
    // remotes: remote add, clone, fetch, partial clones
    "remote.*.url",
    "remote.*.pushurl",
    "remote.*.fetch",
    "remote.*.push",
    "remote.*.tagopt",
    "remote.*.mirror",
    "remote.*.prune",
    "remote.*.prunetags",
    "remote.*.promisor",
    "remote.*.partialclonefilter",
    "remote.*.skipdefaultupdate",
    "remote.*.skipfetchall",
    // branches and their upstreams: branch --set-upstream-to, push -u, checkout -b
    "branch.*.remote",
    "branch.*.merge",
    "branch.*.rebase",
    "branch.*.pushremote",
    "branch.*.description",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "merge.ff",
    "rebase.autostash",
    "rerere.enabled",
    // identity
    "user.name",
    "user.email",
    "author.name",
    "author.email",
    "committer.name",
    "committer.email",
    // submodule add, submodule init, clone --recurse-submodules (`submodule.active`: which
    // paths are submodules to check out)
    "submodule.active",
    "submodule.*.url",
    "submodule.*.active",
    "submodule.*.branch",
    // git maintenance register, gc
    "maintenance.auto",
    "maintenance.strategy",
    "gc.auto",
    // messages only
    "advice.*",
];

/// The most of a config any part of sbx-shell reads: a larger one is judged as one that
/// cannot be read (refused, or named), never by a part.
pub const CONFIG_LIMIT: u64 = 16 << 20;

/// Keys whose value is a URL git connects to: checked by `url_runs`.
const URL_KEYS: &[&str] = &["remote.*.url", "remote.*.pushurl", "submodule.*.url"];

/// Whether `key` (as `parse` spells it) matches `pattern` (`section.name`,
/// `section.sub.name`; `*` as a whole subsection or name matches any; section and name
/// compared without case, the subsection exactly).
pub fn matches(pattern: &str, key: &[u8]) -> bool {
    let (Some((ps, psub, pname)), Some((ks, ksub, kname))) =
        (split(pattern.as_bytes()), split(key))
    else {
        return false;
    };
    let name_ok = pname == b"*" || pname.eq_ignore_ascii_case(kname);
    let sub_ok = match (psub, ksub) {
        (None, None) => true,
        (Some(b"*"), Some(_)) => true,
        (Some(p), Some(k)) => p == k,
        _ => false,
    };
    ps.eq_ignore_ascii_case(ks) && sub_ok && name_ok
}

/// Whether a URL value makes git run something rather than connect: a transport helper
/// (`ext::cmd`, `fd::`, any `helper::address`) or a leading `-` (read as an option).
pub fn url_runs(url: &[u8]) -> bool {
    let url = url.trim_ascii();
    if url.starts_with(b"-") {
        return true;
    }
    // `<transport>::<address>`: the transport is a word before the first `::`, with no
    // `/` or `:` before it.
    if let Some(at) = url.windows(2).position(|w| w == b"::") {
        let transport = &url[..at];
        if !transport.is_empty()
            && transport
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.' | b'_'))
        {
            return true;
        }
    }
    // An option smuggled into an ssh or upload-pack command line.
    let lower = url.to_ascii_lowercase();
    [
        &b"--upload-pack"[..],
        b"--receive-pack",
        b"--exec",
        b"-oproxycommand",
    ]
    .iter()
    .any(|o| lower.windows(o.len()).any(|w| w == *o))
}

/// Why one entry may not be written, or `None`: its key is neither in `ALLOWED` nor in
/// `extra` (the user's own allowances), or its value is a URL that runs something.
fn refused_entry(entry: &ConfigEntry, extra: &[String]) -> Option<String> {
    let key = String::from_utf8_lossy(&entry.key).into_owned();
    if extra.iter().any(|p| matches(p, &entry.key)) {
        return None;
    }
    if !ALLOWED.iter().any(|p| matches(p, &entry.key)) {
        return Some(key);
    }
    let url = URL_KEYS.iter().any(|p| matches(p, &entry.key));
    match &entry.value {
        Some(v) if url && url_runs(v) => Some(format!("{key} (a URL that runs a command)")),
        _ => None,
    }
}

/// What is wrong with a config a session wants to write, in order: the keys refused
/// (each once, as `--allow-git-config` takes it), or the line where git cannot read it.
/// Empty: it may be written. `extra`: patterns the user allows besides `ALLOWED`.
pub fn refused(text: &[u8], extra: &[String]) -> Vec<String> {
    match parse(text) {
        Err(e) => vec![format!("a config git cannot read ({e})")],
        Ok(entries) => {
            let mut out: Vec<String> = Vec::new();
            for entry in &entries {
                if let Some(why) = refused_entry(entry, extra) {
                    if !out.contains(&why) {
                        out.push(why);
                    }
                }
            }
            out
        }
    }
}

/// Whether `pattern` is one `--allow-git-config` takes: `section.name` or
/// `section.subsection.name`, the section a name, `*` allowed as the subsection or name.
pub fn valid_pattern(pattern: &str) -> bool {
    let Some((section, _, name)) = split(pattern.as_bytes()) else {
        return false;
    };
    let word = |w: &[u8]| !w.is_empty() && w.iter().all(|c| is_key_char(*c));
    word(section) && (name == b"*" || word(name))
}

#[cfg(test)]
mod tests;
