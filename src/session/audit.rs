//! Landlock's own refusals, from the kernel's audit records (Linux 6.15 and later): the
//! reads Landlock refuses are seen nowhere else (the guard sees writes only). Read where
//! the kernel's audit is on and sbx-shell may read its records (CAP_AUDIT_READ: root);
//! elsewhere `open` says why not, and nothing is read. sbx-shell never turns the audit
//! on (it is system-wide).
//!
//! The records arrive on the audit's read-only multicast group: an `AUDIT_LANDLOCK_ACCESS`
//! per refusal, with its domain, what blocked it and the path. A domain is the session's
//! when it refused the session's marker: the helper, once restricted and before its exec,
//! opens the session's journal for writing (`Ruleset::audit_marker`), so that refusal is
//! the domain's first record — no process need still be there to be asked. Parsing is pure
//! (`parse`).

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The record types (`linux/audit.h`).
const AUDIT_GET: u16 = 1000;
const LANDLOCK_ACCESS: u16 = 1423;
/// The group that reads the audit's records without being its daemon.
const AUDIT_NLGRP_READLOG: u32 = 1;

/// A refusal, as far as sbx-shell reads it: its domain, what blocked it (`fs.read_file`,
/// …) and the path, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord {
    pub domain: String,
    pub blockers: Vec<String>,
    pub path: Option<PathBuf>,
}

/// The value of `key=` in an audit record's text: a quoted string, hex (audit's spelling of
/// a value with spaces or odd bytes), or a bare word.
fn field(text: &str, key: &str) -> Option<Vec<u8>> {
    let at = text
        .match_indices(key)
        .find(|(i, _)| *i == 0 || text.as_bytes()[i - 1] == b' ')
        .map(|(i, _)| i + key.len())?;
    let rest = text[at..].strip_prefix('=')?;
    if let Some(quoted) = rest.strip_prefix('"') {
        return Some(quoted.split('"').next()?.as_bytes().to_vec());
    }
    let word = rest.split(' ').next()?;
    let hex = word.len() % 2 == 0
        && word.len() >= 2
        && word
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_lowercase());
    if hex && key == "path" {
        return (0..word.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&word[i..i + 2], 16).ok())
            .collect();
    }
    Some(word.as_bytes().to_vec())
}

/// A record of type `kind` with `text`, when it is a refusal of Landlock's.
pub fn parse(kind: u16, text: &str) -> Option<AuditRecord> {
    use std::os::unix::ffi::OsStrExt;
    if kind != LANDLOCK_ACCESS {
        return None;
    }
    let string = |key| field(text, key).and_then(|v| String::from_utf8(v).ok());
    Some(AuditRecord {
        domain: string("domain")?,
        blockers: string("blockers")?.split(',').map(String::from).collect(),
        path: field(text, "path")
            .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(&p)))
            .filter(|p| p.is_absolute()),
    })
}

/// Whether a refusal's blockers are about reading (else writing, or not the filesystem).
pub fn reads(blockers: &[String]) -> bool {
    blockers
        .iter()
        .all(|b| b == "fs.read_file" || b == "fs.read_dir" || b == "fs.execute")
}

/// A socket on the audit's read-only group, once the audit is known to be on.
pub struct AuditReader(OwnedFd);

/// A netlink socket of the audit's, bound to `groups`.
fn audit_socket(groups: u32) -> io::Result<OwnedFd> {
    use nix::sys::socket::{bind, socket, AddressFamily, NetlinkAddr, SockFlag, SockProtocol};
    let fd = socket(
        AddressFamily::Netlink,
        nix::sys::socket::SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkAudit,
    )?;
    bind(fd.as_raw_fd(), &NetlinkAddr::new(0, groups))?;
    Ok(fd)
}

/// Each netlink message in `buf`: its type and payload.
fn messages(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let len = u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        let kind = u16::from_ne_bytes([buf[at + 4], buf[at + 5]]);
        if len < 16 || at + len > buf.len() {
            break;
        }
        out.push((kind, &buf[at + 16..at + len]));
        at += (len + 3) & !3;
    }
    out
}

fn receive(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<usize> {
    Ok(nix::sys::socket::recv(
        fd.as_raw_fd(),
        buf,
        nix::sys::socket::MsgFlags::empty(),
    )?)
}

/// Whether the kernel's audit is on (`AUDIT_GET`; root may ask).
fn audit_enabled() -> io::Result<bool> {
    let fd = audit_socket(0)?;
    let mut request = [0u8; 16];
    request[0..4].copy_from_slice(&16u32.to_ne_bytes());
    request[4..6].copy_from_slice(&AUDIT_GET.to_ne_bytes());
    request[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    nix::sys::socket::send(
        fd.as_raw_fd(),
        &request,
        nix::sys::socket::MsgFlags::empty(),
    )?;
    let mut buf = vec![0u8; 8192];
    for _ in 0..4 {
        let n = receive(&fd, &mut buf)?;
        for (kind, payload) in messages(&buf[..n]) {
            if kind == AUDIT_GET && payload.len() >= 8 {
                return Ok(
                    u32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]) != 0,
                );
            }
            if kind == libc::NLMSG_ERROR as u16 && payload.len() >= 4 {
                let errno = i32::from_ne_bytes([payload[0], payload[1], payload[2], payload[3]]);
                if errno != 0 {
                    return Err(io::Error::from_raw_os_error(-errno));
                }
            }
        }
    }
    Err(io::Error::other("no answer from the audit"))
}

impl AuditReader {
    /// The reader, or why Landlock's refusals cannot be read here.
    pub fn open() -> Result<AuditReader, String> {
        match audit_enabled() {
            Ok(true) => {}
            Ok(false) => {
                return Err("the kernel's audit is off (it is system-wide: `auditctl -e 1`)".into())
            }
            Err(e) => {
                return Err(format!(
                    "the kernel's audit cannot be asked ({e}; root may)"
                ))
            }
        }
        let fd = audit_socket(AUDIT_NLGRP_READLOG)
            .map_err(|e| format!("its records cannot be read ({e}; CAP_AUDIT_READ is needed)"))?;
        let timeout = nix::sys::time::TimeVal::new(0, 100_000);
        // Without it a read waits for the next record (the session's end is seen late).
        let _ =
            nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &timeout);
        Ok(AuditReader(fd))
    }

    /// Read until `ending` says the session is over and 100 ms pass without a record,
    /// recording each refusal of the domains that refused `marker` through `judge`
    /// (`None`: not one sbx-shell names).
    pub fn run(
        self,
        marker: &Path,
        ending: &dyn Fn() -> bool,
        judge: &dyn Fn(&[String], &Path) -> Option<crate::policy::refusal::Refusal>,
        record: &dyn Fn(crate::policy::refusal::Refusal),
    ) {
        let mut ours: HashSet<String> = HashSet::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match receive(&self.0, &mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && ending() => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            for (kind, payload) in messages(&buf[..n]) {
                let Some(AuditRecord {
                    domain,
                    blockers,
                    path: Some(path),
                }) = parse(kind, &String::from_utf8_lossy(payload))
                else {
                    continue;
                };
                if path == marker {
                    ours.insert(domain);
                } else if ours.contains(&domain) {
                    if let Some(r) = judge(&blockers, &path) {
                        record(r);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landlock_records_are_read_with_their_domain_blockers_and_path() {
        let access = "audit(1732480000.123:456): domain=195ba459b blockers=fs.read_file path=\"/root/.ssh/id_ed25519\" dev=\"vda\" ino=12";
        assert_eq!(
            parse(LANDLOCK_ACCESS, access),
            Some(AuditRecord {
                domain: "195ba459b".into(),
                blockers: vec!["fs.read_file".into()],
                path: Some("/root/.ssh/id_ed25519".into()),
            })
        );
        // A path with a space is hex.
        let hex = "domain=1a blockers=fs.make_reg,fs.refer path=2F612062 dev=\"vda\" ino=3";
        let record = parse(LANDLOCK_ACCESS, hex).unwrap();
        assert_eq!(record.path, Some("/a b".into()));
        assert!(!reads(&record.blockers));
        let allocated = "domain=195ba459b status=allocated mode=enforcing pid=4242";
        assert_eq!(parse(1424, allocated), None);
        assert_eq!(parse(1300, access), None);
        assert!(reads(&["fs.read_file".into(), "fs.read_dir".into()]));
    }

    #[test]
    fn messages_are_split_by_their_lengths() {
        let mut buf = Vec::new();
        for (kind, text) in [(LANDLOCK_ACCESS, "abc"), (1424, "de")] {
            let len = 16 + text.len();
            buf.extend((len as u32).to_ne_bytes());
            buf.extend(kind.to_ne_bytes());
            buf.extend([0u8; 10]);
            buf.extend(text.as_bytes());
            buf.resize((buf.len() + 3) & !3, 0);
        }
        assert_eq!(
            messages(&buf),
            [(LANDLOCK_ACCESS, &b"abc"[..]), (1424, &b"de"[..])]
        );
    }
}
