//! The macOS backend: a deny-default Seatbelt (SBPL) profile, run by
//! `/usr/bin/sandbox-exec`.
//!
//! `build_profile` is pure and runs on every OS (so `explain` shows a Linux user the macOS
//! profile, and golden files pin it). Static rules live in `seatbelt/*.sbpl`; the rules built
//! here only name `-D` parameters, so no path text is ever pasted into the profile. Order
//! matters, since the last matching rule wins: every allow comes first, then the denies —
//! denied paths, protected paths and their parents, and the GUI when not granted. A test pins
//! that order. Only `/usr/bin/sandbox-exec` is ever run: one found on `PATH` could be anyone's.
//!
//! A network allow-list leaves one destination: the loopback port of sbx-shell's proxy
//! (`netproxy`), which resolves names and checks every request.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use thiserror::Error;

use crate::policy::config::FsMode;
use crate::policy::{Network, Policy, ResolvedPath, KEYCHAINS};

const BASE: &str = include_str!("seatbelt/base.sbpl");
const NESTED_PTY: &str = include_str!("seatbelt/nested_pty.sbpl");
const KEYCHAIN: &str = include_str!("seatbelt/keychain.sbpl");
const NETWORK_FULL: &str = include_str!("seatbelt/network_full.sbpl");
const NETWORK_PROXY: &str = include_str!("seatbelt/network_proxy.sbpl");
const GUI: &str = include_str!("seatbelt/gui.sbpl");
const NO_GUI: &str = include_str!("seatbelt/no_gui.sbpl");

/// Operations the generated profiles may use; anything else is a bug.
const KNOWN_OPERATIONS: &[&str] = &[
    "default",
    "process-exec",
    "process-fork",
    "signal",
    "process-info*",
    "file-read*",
    "file-write*",
    "file-ioctl",
    "file-write-unlink",
    "system-socket",
    "ipc-posix-sem",
    "ipc-posix-shm",
    "user-preference-read",
    "mach-lookup",
    "sysctl-read",
    "pseudo-tty",
    "network-outbound",
    "network-inbound",
    "network-bind",
    "iokit-open",
];
/// The longest string literal a profile may hold.
const MAX_LITERAL: usize = 1024;

/// What the profile is built from besides the policy.
#[derive(Debug, Clone, Copy)]
pub struct SeatbeltInputs<'a> {
    pub policy: &'a Policy,
    /// The per-user temporary directory ($TMPDIR, real path), writable in workspace-write.
    pub temp_dir: Option<&'a Path>,
    /// The session's terminal (the inner pty's slave), for ioctls on inherited fds.
    pub tty: Option<&'a Path>,
    /// The terminals that existed when the session started (`/dev/ttys*`, the outer
    /// terminal among them), denied by name; the session's own (`tty`) is left out here.
    pub terminals: &'a [PathBuf],
    /// With `keychain_access`: the user's per-user directories (`confstr`), real paths.
    pub user_dirs: &'a [PathBuf],
    /// The loopback port of the allow-list proxy (needed for an allow-list).
    pub proxy_port: Option<u16>,
}

/// An SBPL profile and the values of its parameters (paths, and the regexes of their
/// spellings: `any_spelling`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Profile {
    pub text: String,
    pub params: Vec<(String, PathBuf)>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SeatbeltError {
    #[error("internal error: a network allow-list without the proxy's port")]
    NoProxy,
    #[error("internal error: the generated Seatbelt profile is malformed: {0}")]
    Malformed(String),
}

/// Build the profile for `inputs`.
pub fn build_profile(inputs: &SeatbeltInputs<'_>) -> Result<Profile, SeatbeltError> {
    let policy = inputs.policy;
    let mut b = Builder::default();
    b.text.push_str(BASE);
    if policy.nested_pty {
        b.section(NESTED_PTY);
    }
    if policy.keychain_access {
        b.param(
            "KEYCHAINS",
            &policy
                .filesystem
                .home
                .path
                .join(KEYCHAINS.trim_start_matches("~/")),
        );
        b.section(KEYCHAIN);
        let names = b.params("USER_DIR", inputs.user_dirs.iter().map(PathBuf::as_path));
        b.rule("allow", "file-read* file-write*", "subpath", &names);
    }
    match policy.network {
        Network::None => {}
        Network::Full => b.section(NETWORK_FULL),
        Network::Allow(_) => {
            let port = inputs.proxy_port.ok_or(SeatbeltError::NoProxy)?;
            b.section(NETWORK_PROXY);
            // The proxy, and the host's loopback services the allow-list names.
            for port in std::iter::once(port).chain(policy.network.loopback_ports()) {
                let _ = writeln!(
                    b.text,
                    "(allow network-outbound (remote tcp \"localhost:{port}\"))"
                );
            }
        }
    }
    write_sockets(&mut b, policy);
    if policy.gui {
        b.section(GUI);
    }
    write_tty(&mut b, inputs.tty);
    write_writable(&mut b, policy, inputs.temp_dir);
    write_denied(&mut b, policy);
    write_protected(&mut b, policy);
    write_parents(&mut b, policy);
    write_terminals(&mut b, inputs.terminals, inputs.tty);
    if !policy.gui {
        b.section(NO_GUI);
    }
    check_structure(&b.text).map_err(SeatbeltError::Malformed)?;
    Ok(Profile {
        text: b.text,
        params: b.params,
    })
}

/// `/usr/bin/sandbox-exec -p PROFILE -D NAME=VALUE… COMMAND…`
pub fn build_argv(profile: &Profile, command: &[OsString]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        crate::host::SANDBOX_EXEC.into(),
        "-p".into(),
        profile.text.clone().into(),
    ];
    for (name, value) in &profile.params {
        let mut define = OsString::from(format!("{name}="));
        define.push(value.as_os_str());
        argv.push("-D".into());
        argv.push(define);
    }
    argv.extend(command.iter().cloned());
    argv
}

fn write_tty(b: &mut Builder, tty: Option<&Path>) {
    if let Some(tty) = tty {
        let names = b.params("TTY", [tty]);
        b.rule(
            "allow",
            "file-read* file-write* file-ioctl",
            "literal",
            &names,
        );
    }
}

fn write_writable(b: &mut Builder, policy: &Policy, temp_dir: Option<&Path>) {
    let fs = &policy.filesystem;
    match fs.mode {
        FsMode::Unrestricted => {
            b.section("; filesystem unrestricted: everything writable but what is denied below.\n(allow file-write*)\n");
        }
        FsMode::WorkspaceWrite => {
            b.comment("The workspace, the temporary directories and the writable roots.");
            let mut paths: Vec<&Path> = fs.workspace.spellings();
            paths.extend(temp_dir);
            paths.push(Path::new("/private/tmp"));
            let names = b.params(
                "WRITABLE",
                paths.iter().copied().chain(spellings(&fs.writable)),
            );
            b.rule("allow", "file-read* file-write*", "subpath", &names);
        }
        FsMode::ReadOnly => {
            b.comment("read-only: only the writable roots named explicitly.");
            let names = b.params("WRITABLE", spellings(&fs.writable));
            b.rule("allow", "file-read* file-write*", "subpath", &names);
        }
    }
}

fn write_denied(b: &mut Builder, policy: &Policy) {
    b.comment("Denied: credentials and private data, neither readable nor writable.");
    let names = b.params("DENIED", spellings(&policy.filesystem.denied));
    b.rule("deny", "file-read* file-write*", "subpath", &names);
    let names = b.any_spellings("DENIED_ANY", spellings(&policy.filesystem.denied), SUBPATH);
    b.rule("deny", "file-read* file-write*", "regex", &names);
    let revealed = &policy.filesystem.revealed;
    if !revealed.is_empty() {
        b.comment(
            "Revealed inside a denied path: readable (the ssh client's known_hosts and config).",
        );
        let names = b.params("REVEALED", spellings(revealed));
        b.rule("allow", "file-read*", "subpath", &names);
    }
}

/// The granted host sockets: connecting to a unix socket is `network-outbound`, denied
/// unless the network is `full` (which leaves every one reachable: issue 17).
fn write_sockets(b: &mut Builder, policy: &Policy) {
    let own = policy.filesystem.own_sockets.iter().map(PathBuf::as_path);
    let names = b.params("SOCKET", spellings(&policy.filesystem.sockets).chain(own));
    if names.is_empty() {
        return;
    }
    b.comment("Granted host sockets: connectable.");
    let mut rule = String::from("(allow network-outbound");
    for name in names {
        let _ = write!(
            rule,
            "\n  (remote unix-socket (path-literal (param \"{name}\")))"
        );
    }
    rule.push_str(")\n");
    b.text.push_str(&rule);
}

fn write_protected(b: &mut Builder, policy: &Policy) {
    let protected = &policy.filesystem.protected;
    // The deepest entry wins, as under bwrap: a writable grant inside a protected directory
    // (the private home inside sbx-shell's state) stays writable.
    let inside = |p: &Path| -> Vec<&Path> {
        spellings(&policy.filesystem.writable)
            .filter(|w| w.starts_with(p) && *w != p)
            .collect()
    };
    b.comment("Protected: readable, never written, renamed or removed ...");
    let plain: Vec<&Path> = spellings(protected)
        .filter(|p| inside(p).is_empty())
        .collect();
    let names = b.params("PROTECTED", plain.iter().copied());
    b.rule("deny", "file-write*", "subpath", &names);
    let names = b.any_spellings("PROTECTED_ANY", plain, SUBPATH);
    b.rule("deny", "file-write*", "regex", &names);
    let carved: Vec<&Path> = spellings(protected)
        .filter(|p| !inside(p).is_empty())
        .collect();
    if !carved.is_empty() {
        b.comment("... except the writable grants inside them (the deepest entry wins) ...");
    }
    for (i, path) in carved.into_iter().enumerate() {
        let name = format!("PROTECTED_WITH_GRANTS_{i}");
        b.param(&name, path);
        let keep = b.params(&format!("{name}_GRANT"), inside(path));
        b.carved(&name, "subpath", &keep);
        let any = format!("{name}_ANY");
        b.param(&any, Path::new(&any_spelling(path, SUBPATH)));
        let keep = b.any_spellings(&format!("{name}_GRANT_ANY"), inside(path), SUBPATH);
        b.carved(&any, "regex", &keep);
    }
}

/// Denied and protected paths cannot be moved away with a parent directory (and exposed,
/// or replaced, in the next session): every ancestor but `/` is unlink-protected.
fn write_parents(b: &mut Builder, policy: &Policy) {
    let fs = &policy.filesystem;
    b.comment("Denied and protected paths are not moved away with a parent directory.");
    let parents: BTreeSet<&Path> = spellings(&fs.denied)
        .chain(spellings(&fs.protected))
        .flat_map(|p| p.ancestors().skip(1))
        .filter(|p| p.parent().is_some())
        .collect();
    let names = b.params("PARENT", parents.iter().copied());
    b.rule("deny", "file-write-unlink", "literal", &names);
    let names = b.any_spellings("PARENT_ANY", parents, LITERAL);
    b.rule("deny", "file-write-unlink", "regex", &names);
}

/// The terminals that existed when the session started, other than its own — the outer
/// terminal sbx-shell relays among them: never opened, read, written or ioctl'd, even
/// through an allow above; except when the program made it (a pty's number, freed since,
/// given again to one the program opened: the kernel marked that one as the program's).
fn write_terminals(b: &mut Builder, terminals: &[PathBuf], own: Option<&Path>) {
    let others: BTreeSet<&Path> = terminals
        .iter()
        .map(PathBuf::as_path)
        .filter(|t| Some(*t) != own)
        .collect();
    let names = b.params("TERMINAL", others);
    if names.is_empty() {
        return;
    }
    b.comment("The terminals that existed at the start, the outer one among them.");
    let mut rule =
        String::from("(deny file-read* file-write* file-ioctl\n  (require-all\n    (require-any");
    for name in names {
        let _ = write!(rule, "\n      (literal (param \"{name}\"))");
    }
    rule.push_str(")\n    (require-not (extension \"com.apple.sandbox.pty\"))))\n");
    b.text.push_str(&rule);
}

/// How `any_spelling` ends: a directory and everything below, or exactly the path.
const SUBPATH: &str = "(/|$)";
const LITERAL: &str = "$";

/// A regex for every spelling of the real path `path` that reaches the same file on
/// macOS: each ASCII letter in either case, with or without the data volume's firmlink
/// prefix `/System/Volumes/Data`. Non-ASCII letters (APFS also ignores their case and
/// Unicode normalization) match any run of characters there, and ASCII punctuation that
/// means something in a regex any one character: wider, never narrower, which for a deny
/// is safe.
pub fn any_spelling(path: &Path, end: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    const DATA: &str = "/System/Volumes/Data";
    let bytes = path.as_os_str().as_bytes();
    let bare = bytes
        .strip_prefix(DATA.as_bytes())
        .filter(|rest| rest.starts_with(b"/"));
    let on_system = bytes.starts_with(b"/System/") || bytes.starts_with(b"/dev/");
    let body = bare.unwrap_or(bytes);
    let mut out = String::from("^");
    if bare.is_some() || !on_system {
        out.push('(');
        fold_into(&mut out, DATA.as_bytes());
        out.push_str(")?");
    }
    if body.iter().all(|b| *b == b'/') {
        out.push('/');
    } else {
        fold_into(&mut out, body);
    }
    out.push_str(end);
    out
}

/// `path` (absolute, `/`-separated) with its letters in either case (`any_spelling`).
fn fold_into(out: &mut String, path: &[u8]) {
    for component in path.split(|b| *b == b'/').filter(|c| !c.is_empty()) {
        out.push('/');
        let mut in_run = false;
        for &b in component {
            if !b.is_ascii() {
                if !in_run {
                    out.push_str("[^/]*");
                }
                in_run = true;
                continue;
            }
            in_run = false;
            match b {
                c if c.is_ascii_alphabetic() => {
                    out.push('[');
                    out.push(c.to_ascii_lowercase() as char);
                    out.push(c.to_ascii_uppercase() as char);
                    out.push(']');
                }
                b'.' => out.push_str("[.]"),
                b' ' => out.push_str("[ ]"),
                c if c.is_ascii_digit() || b"_-,@%=~:".contains(&c) => out.push(c as char),
                _ => out.push('.'),
            }
        }
    }
}

fn spellings(paths: &[ResolvedPath]) -> impl Iterator<Item = &Path> {
    paths.iter().flat_map(ResolvedPath::spellings)
}

#[derive(Default)]
struct Builder {
    text: String,
    params: Vec<(String, PathBuf)>,
}

impl Builder {
    fn section(&mut self, rules: &str) {
        self.text.push('\n');
        self.text.push_str(rules);
    }

    fn comment(&mut self, line: &str) {
        let _ = write!(self.text, "\n; {line}\n");
    }

    fn param(&mut self, name: &str, value: &Path) {
        self.params.push((name.to_string(), value.to_path_buf()));
    }

    /// Number the paths as PREFIX_0, PREFIX_1 … and return their names.
    fn params<'p>(
        &mut self,
        prefix: &str,
        paths: impl IntoIterator<Item = &'p Path>,
    ) -> Vec<String> {
        paths
            .into_iter()
            .enumerate()
            .map(|(i, path)| {
                let name = format!("{prefix}_{i}");
                self.param(&name, path);
                name
            })
            .collect()
    }

    /// The `any_spelling` regexes of `paths` (each once) as parameters PREFIX_0, PREFIX_1 …
    fn any_spellings<'p>(
        &mut self,
        prefix: &str,
        paths: impl IntoIterator<Item = &'p Path>,
        end: &str,
    ) -> Vec<String> {
        let mut regexes: Vec<PathBuf> = Vec::new();
        for regex in paths
            .into_iter()
            .map(|p| PathBuf::from(any_spelling(p, end)))
        {
            if !regexes.contains(&regex) {
                regexes.push(regex);
            }
        }
        self.params(prefix, regexes.iter().map(PathBuf::as_path))
    }

    /// `(deny file-write* (require-all (FILTER NAME) (require-not (FILTER KEEP))…))`.
    fn carved(&mut self, name: &str, filter: &str, keep: &[String]) {
        let mut rule = format!("(deny file-write*\n  (require-all ({filter} (param \"{name}\"))");
        for k in keep {
            let _ = write!(rule, "\n    (require-not ({filter} (param \"{k}\")))");
        }
        rule.push_str("))\n");
        self.text.push_str(&rule);
    }

    /// `(ACTION OPERATIONS (FILTER (param "NAME")) …)`, nothing when there are no names.
    fn rule(&mut self, action: &str, operations: &str, filter: &str, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let _ = write!(self.text, "({action} {operations}");
        for name in names {
            let _ = write!(self.text, "\n  ({filter} (param \"{name}\"))");
        }
        self.text.push_str(")\n");
    }
}

/// Check what the builder produced: balanced parentheses, known operations after every
/// allow/deny, string literals escaped and at most 1 KiB.
pub fn check_structure(text: &str) -> Result<(), String> {
    let mut depth: i64 = 0;
    let mut chars = text.char_indices().peekable();
    let mut after_open = false;
    let mut operations_of: Option<String> = None;
    while let Some((at, c)) = chars.next() {
        match c {
            ';' => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                let mut length = 0;
                loop {
                    match chars.next() {
                        None | Some((_, '\n')) => {
                            return Err(format!("unterminated string at byte {at}"))
                        }
                        Some((_, '"')) => break,
                        Some((_, '\\')) => match chars.next() {
                            Some((_, '"' | '\\')) => length += 1,
                            _ => return Err(format!("bad escape in the string at byte {at}")),
                        },
                        Some((_, c)) if c.is_control() => {
                            return Err(format!("control character in the string at byte {at}"))
                        }
                        Some(_) => length += 1,
                    }
                    if length > MAX_LITERAL {
                        return Err(format!(
                            "string literal over {MAX_LITERAL} bytes at byte {at}"
                        ));
                    }
                }
                after_open = false;
            }
            '(' => {
                depth += 1;
                after_open = true;
                operations_of = None;
            }
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' at byte {at}"));
                }
                after_open = false;
                operations_of = None;
            }
            c if c.is_whitespace() => {}
            _ => {
                let mut atom = String::from(c);
                while let Some((_, next)) = chars.peek() {
                    if next.is_whitespace() || matches!(next, '(' | ')' | '"' | ';') {
                        break;
                    }
                    atom.push(*next);
                    chars.next();
                }
                if after_open && (atom == "allow" || atom == "deny") {
                    operations_of = Some(atom);
                } else if let Some(action) = &operations_of {
                    if !atom.starts_with('#') && !KNOWN_OPERATIONS.contains(&atom.as_str()) {
                        return Err(format!(
                            "unknown operation {atom:?} after {action} at byte {at}"
                        ));
                    }
                }
                after_open = false;
            }
        }
    }
    if depth != 0 {
        return Err(format!("{depth} unclosed '('"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
