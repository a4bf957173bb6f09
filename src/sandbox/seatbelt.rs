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

use crate::config::FsMode;
use crate::policy::{Network, Policy, ResolvedPath, KEYCHAINS};

/// The only sandbox-exec sbx-shell runs.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

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
pub struct Inputs<'a> {
    pub policy: &'a Policy,
    /// The per-user temporary directory ($TMPDIR, real path), writable in workspace-write.
    pub temp_dir: Option<&'a Path>,
    /// The session's terminal (the inner pty's slave), for ioctls on inherited fds.
    pub tty: Option<&'a Path>,
    /// The loopback port of the allow-list proxy (needed for an allow-list).
    pub proxy_port: Option<u16>,
}

/// An SBPL profile and the values of its parameters.
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
pub fn build_profile(inputs: &Inputs<'_>) -> Result<Profile, SeatbeltError> {
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
    }
    match policy.network {
        Network::None => {}
        Network::Full => b.section(NETWORK_FULL),
        Network::Allow(_) => {
            let port = inputs.proxy_port.ok_or(SeatbeltError::NoProxy)?;
            b.section(NETWORK_PROXY);
            let _ = writeln!(
                b.text,
                "(allow network-outbound (remote tcp \"localhost:{port}\"))"
            );
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
        SANDBOX_EXEC.into(),
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
}

/// The granted host sockets: connecting to a unix socket is `network-outbound`, denied
/// unless the network is `full` (which leaves every one reachable: issue 17).
fn write_sockets(b: &mut Builder, policy: &Policy) {
    let names = b.params("SOCKET", spellings(&policy.filesystem.sockets));
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
    let names = b.params("PROTECTED", plain);
    b.rule("deny", "file-write*", "subpath", &names);
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
        let mut rule = format!("(deny file-write*\n  (require-all (subpath (param \"{name}\"))");
        for k in keep {
            let _ = write!(rule, "\n    (require-not (subpath (param \"{k}\")))");
        }
        rule.push_str("))\n");
        b.text.push_str(&rule);
    }
    b.comment("... nor moved away with a parent directory.");
    let parents: BTreeSet<&Path> = spellings(protected)
        .flat_map(|p| p.ancestors().skip(1))
        .filter(|p| p.parent().is_some())
        .collect();
    let names = b.params("PROTECTED_PARENT", parents);
    b.rule("deny", "file-write-unlink", "literal", &names);
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
