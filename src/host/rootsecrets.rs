//! Root-only files: what a session started by root cannot read unless its policy allows it.
//!
//! Inside the sandbox root keeps uid 0 but no capabilities, so it reads what uid 0 reads by
//! the permission bits alone: whatever root owns and does not let others read. So every
//! file or directory that others cannot read (a directory: enter) but uid 0 can through its
//! owner or group bits (`root_only`) is denied, wherever it is: the whole host is walked
//! (`Walk`), all but what the sandbox does not show (`NOT_SHOWN`), what the session has
//! anyway — its home (which has its own policy), its workspace and the paths its policy
//! grants (`--read`, `--write`) — and network or user file systems (`REMOTE`: slow, and
//! not root's). A root-only directory is denied as a whole, unless it holds one of those:
//! then its other entries are walked. An empty file holds nothing (locks are left alone).
//! The policy's `allow_denied` takes a path out.
//!
//! The walk keeps a record of what it found in each directory (`WalkRecord`, in `CACHE`): a
//! directory whose identity, mtime and ctime are unchanged has the same entries, so its
//! listing is taken from the record and only its subdirectories are looked at again — one
//! `lstat` per directory, not per file. A directory's own mode is always looked at afresh.
//! What the record cannot see is a file of an unchanged directory made root-only in place
//! (`chmod`, `chown`): it is found when its directory next changes, or at the next walk
//! that ignores the record, which happens once the record is a day old (`MAX_AGE`).
//!
//! Root's own home secrets are the default denied paths of the home directory; when
//! `$HOME` is not root's home (`sudo -E`), those of root's home are denied too.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What the sandbox does not show (bwrap: its own; alone: not readable), so not walked.
pub const NOT_SHOWN: &[&str] = &["/proc", "/sys", "/dev", "/tmp"];
/// Where the walk's record is kept between root's sessions (root's own, 0600 in 0700).
pub const CACHE: &str = "/var/cache/sbx-shell/root-only.json";
/// A record made longer ago than this is not used: the walk looks at every file again.
pub const MAX_AGE: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// File systems not walked (Linux's `statfs` f_type): network ones (a walk could hang on them,
/// and their files are not root's by uid), FUSE (the user's), autofs (walking would mount).
#[cfg(target_os = "linux")]
const REMOTE: &[i64] = &[
    0x6969,      // NFS
    0x517b,      // SMB
    0xff53_4d42, // CIFS
    0xfe53_4d42, // SMB2
    0x6573_5546, // FUSE
    0x00c3_6400, // Ceph
    0x0102_1997, // 9P
    0x5346_414f, // AFS
    0x0187,      // autofs
];

/// Pure: whether a file of this owner, group and mode is root's only: uid 0 can read it
/// (a directory: enter it) through the owner or group bits, and others cannot.
pub fn root_only(uid: u32, gid: u32, mode: u32, dir: bool) -> bool {
    let (owner, group, others) = if dir {
        (0o100, 0o010, 0o001)
    } else {
        (0o400, 0o040, 0o004)
    };
    mode & others == 0 && (uid == 0 && mode & owner != 0 || gid == 0 && mode & group != 0)
}

/// The trees that only the package manager changes: `/usr` but `/usr/local`, and, where
/// `/usr` is not merged, `/lib*`, `/bin` and `/sbin`.
pub const PACKAGE_TREES: &[&str] = &[
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
];
/// The package managers' databases: while none changed, the package trees did not either
/// (`package_state`).
const PACKAGE_DBS: &[&str] = &[
    "/var/lib/dpkg/status",
    "/var/lib/rpm",
    "/usr/lib/sysimage/rpm",
    "/lib/apk/db/installed",
    "/var/lib/pacman/local",
];

/// Whether `path` lies in a package tree (`/usr/local`, and `/usr` itself, which holds it,
/// do not).
fn in_packages(path: &Path) -> bool {
    PACKAGE_TREES.iter().any(|t| path.starts_with(t))
        && !Path::new("/usr/local").starts_with(path)
        && !path.starts_with("/usr/local")
}

/// The state of the package databases there are (`None`: none, so the package trees are
/// walked like the rest).
pub fn package_state() -> Option<String> {
    let parts: Vec<String> = PACKAGE_DBS
        .iter()
        .filter_map(|db| {
            let m = Path::new(db).symlink_metadata().ok()?;
            Some(format!("{db}:{}.{}:{}", m.mtime(), m.mtime_nsec(), m.len()))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// What the walk saw of each directory, by path (`CACHE`).
#[derive(Debug, Default)]
pub struct WalkRecord {
    /// When every file was last looked at (seconds since the epoch).
    pub made: u64,
    /// The package databases' state when the package trees were walked, and what was
    /// found in them then.
    pub packages: Option<String>,
    pub package_found: Vec<PathBuf>,
    pub dirs: HashMap<PathBuf, Listing>,
    /// The package trees' lines of the record, carried over as read when they were not
    /// walked.
    verbatim: Vec<u8>,
    /// Whether a listing was read afresh, or a directory is gone: worth writing.
    changed: bool,
}

/// One directory: what identifies this state of it, and the names of its root-only files
/// (not empty) and of its subdirectories, each list joined by `/` (which no name holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub id: [i64; 6],
    pub files: Vec<u8>,
    pub dirs: Vec<u8>,
}

/// The names of a joined list.
fn names(joined: &[u8]) -> impl Iterator<Item = &OsStr> {
    joined
        .split(|b| *b == b'/')
        .filter(|n| !n.is_empty())
        .map(OsStr::from_bytes)
}

fn push_name(joined: &mut Vec<u8>, name: &OsStr) {
    if !joined.is_empty() {
        joined.push(b'/');
    }
    joined.extend_from_slice(name.as_bytes());
}

/// The state of a directory that its listing depends on: device, inode, mtime and ctime.
fn state_of(meta: &Metadata) -> [i64; 6] {
    [
        meta.dev() as i64,
        meta.ino() as i64,
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    ]
}

/// The walk of one session: from `/`, around `kept` (the home and the workspace); the
/// package trees too unless the record's state of them is `packages`' (then what was found
/// there is taken from the record, each path looked at again).
pub struct Walk<'a> {
    kept: &'a [PathBuf],
    packages: Option<String>,
    /// The package trees are not walked.
    trusted: bool,
    /// The previous record's listings, when it is young enough to trust; taken as used.
    old: HashMap<PathBuf, Listing>,
    /// The record this walk leaves.
    pub record: WalkRecord,
    /// The root-only files and directories found.
    pub found: Vec<PathBuf>,
}

impl<'a> Walk<'a> {
    pub fn new(
        kept: &'a [PathBuf],
        old: Option<WalkRecord>,
        (now, packages): (u64, Option<String>),
    ) -> Walk<'a> {
        let fresh = old.is_none();
        let old = old.unwrap_or(WalkRecord {
            made: now,
            ..WalkRecord::default()
        });
        let trusted = packages.is_some() && old.packages == packages;
        let mut found = Vec::new();
        if trusted {
            found.extend(
                old.package_found
                    .iter()
                    .filter(|p| still_root_only(p))
                    .cloned(),
            );
        }
        Walk {
            kept,
            trusted,
            record: WalkRecord {
                made: old.made,
                packages: packages.clone(),
                package_found: if trusted {
                    old.package_found
                } else {
                    Vec::new()
                },
                dirs: HashMap::with_capacity(old.dirs.len()),
                verbatim: if trusted { old.verbatim } else { Vec::new() },
                changed: fresh,
            },
            packages,
            old: old.dirs,
            found,
        }
    }

    /// Walk the tree at `top` (a directory).
    pub fn run(&mut self, top: &Path) {
        if let Ok(meta) = top.symlink_metadata() {
            if meta.is_dir() {
                self.directory(top, &meta);
            }
        }
        // A directory of the old record not walked again is gone (or now kept).
        self.record.changed |= !self.old.is_empty();
        if !self.trusted {
            self.record.package_found = self
                .found
                .iter()
                .filter(|p| in_packages(p))
                .cloned()
                .collect();
            self.record.changed |= self.packages.is_some();
        }
        self.found.sort();
        self.found.dedup();
    }

    fn directory(&mut self, path: &Path, meta: &Metadata) {
        let id = state_of(meta);
        let listing = match self.old.remove(path) {
            Some(known) if known.id == id => known,
            _ => {
                self.record.changed = true;
                match list(path, id) {
                    Some(listing) => listing,
                    None => return,
                }
            }
        };
        for name in names(&listing.files) {
            self.found.push(path.join(name));
        }
        for name in names(&listing.dirs) {
            let sub = path.join(name);
            if NOT_SHOWN.iter().any(|n| sub == Path::new(n))
                || self.kept.iter().any(|k| sub.starts_with(k))
                || self.trusted && in_packages(&sub)
            {
                continue;
            }
            let Ok(sub_meta) = sub.symlink_metadata() else {
                continue;
            };
            if !sub_meta.is_dir() || sub_meta.dev() != meta.dev() && remote(&sub) {
                continue;
            }
            let holds_kept = self.kept.iter().any(|k| k.starts_with(&sub));
            if !holds_kept && root_only(sub_meta.uid(), sub_meta.gid(), sub_meta.mode(), true) {
                self.found.push(sub);
                continue;
            }
            self.directory(&sub, &sub_meta);
        }
        self.record.dirs.insert(path.to_path_buf(), listing);
    }
}

/// Whether a path found before is still a root-only file (not empty) or directory.
fn still_root_only(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|m| {
        !m.file_type().is_symlink()
            && (m.is_dir() || m.len() > 0)
            && root_only(m.uid(), m.gid(), m.mode(), m.is_dir())
    })
}

/// A directory's listing, read afresh: each entry but symlinks looked at.
fn list(path: &Path, id: [i64; 6]) -> Option<Listing> {
    let mut listing = Listing {
        id,
        files: Vec::new(),
        dirs: Vec::new(),
    };
    for entry in std::fs::read_dir(path).ok()?.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() {
            push_name(&mut listing.dirs, &entry.file_name());
            continue;
        }
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.len() > 0 && root_only(meta.uid(), meta.gid(), meta.mode(), false) {
            push_name(&mut listing.files, &entry.file_name());
        }
    }
    Some(listing)
}

/// Whether the file system at `path` is one not walked (`REMOTE`).
#[cfg(target_os = "linux")]
fn remote(path: &Path) -> bool {
    nix::sys::statfs::statfs(path)
        .map(|s| {
            #[allow(clippy::useless_conversion)] // c_long: i64 here, i32 on 32-bit targets
            let kind = i64::from(s.filesystem_type().0);
            REMOTE.contains(&kind)
        })
        .unwrap_or(true)
}

/// Whether the file system at `path` is one not walked: network and user ones, by name.
#[cfg(not(target_os = "linux"))]
fn remote(path: &Path) -> bool {
    const NAMES: &[&str] = &[
        "nfs", "smbfs", "afpfs", "webdav", "macfuse", "osxfuse", "autofs",
    ];
    nix::sys::statfs::statfs(path).map_or(true, |s| NAMES.contains(&s.filesystem_type_name()))
}

/// The root-only files and directories of this host around `kept` (real paths: the
/// session's home, workspace and granted paths), using and renewing the record in `CACHE`;
/// and the default denied paths of root's own home when `home` is not it (`denied_in_home`
/// of each).
pub fn found(kept: &[PathBuf], home: &Path, denied_in_home: &[&str]) -> Vec<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let packages = package_state();
    let old = read_record(Path::new(CACHE), packages.as_deref())
        .filter(|r| now.saturating_sub(r.made) < MAX_AGE.as_secs());
    let mut walk = Walk::new(kept, old, (now, packages));
    walk.run(Path::new("/"));
    if walk.record.changed {
        // A record that cannot be written costs the next session a walk of every file.
        let _ = write_record(Path::new(CACHE), &walk.record);
    }
    let mut out = walk.found;
    if let Some(root_home) = root_home().filter(|h| h != home) {
        out.extend(
            denied_in_home
                .iter()
                .map(|p| root_home.join(p))
                .filter(|p| p.symlink_metadata().is_ok()),
        );
    }
    out
}

/// The record's first line (its format).
const RECORD_HEADER: &[u8] = b"sbx-shell root-only record 1";

/// The record at `path`, when it is root's own and nobody else may write it: the header,
/// when it was made, the package databases' state and what was found in the package
/// trees (NUL-separated), then one line per directory: its path, its state (six numbers),
/// its files and its subdirectories, separated by NUL (which no path holds). When the
/// state is `packages`, the package trees' lines are kept as they are, not read.
fn read_record(path: &Path, packages: Option<&str>) -> Option<WalkRecord> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).ok()?;
    // The package trees' lines come last, after a line of their own.
    let (head, package_lines) = match find(&bytes, PACKAGES_LINE) {
        Some(at) => (&bytes[..at], &bytes[at + PACKAGES_LINE.len()..]),
        None => (&bytes[..], &[][..]),
    };
    let mut lines = head.split(|b| *b == b'\n');
    if lines.next()? != RECORD_HEADER {
        return None;
    }
    let made = std::str::from_utf8(lines.next()?).ok()?.parse().ok()?;
    let state = std::str::from_utf8(lines.next()?).ok()?;
    let state = (state != "-").then(|| state.to_string());
    let package_found: Vec<PathBuf> = names_nul(lines.next()?).collect();
    let trusted = packages.is_some() && state.as_deref() == packages;
    let mut dirs = HashMap::new();
    let verbatim = if trusted {
        package_lines.to_vec()
    } else {
        Vec::new()
    };
    let package_lines = (!trusted).then(|| package_lines.split(|b| *b == b'\n'));
    for line in lines
        .chain(package_lines.into_iter().flatten())
        .filter(|l| !l.is_empty())
    {
        let mut fields = line.split(|b| *b == 0);
        let (Some(dir), Some(state), Some(files), Some(subdirs), None) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            return None;
        };
        let mut id = [0i64; 6];
        let mut numbers = std::str::from_utf8(state).ok()?.split(' ');
        for slot in &mut id {
            *slot = numbers.next()?.parse().ok()?;
        }
        dirs.insert(
            PathBuf::from(OsStr::from_bytes(dir)),
            Listing {
                id,
                files: files.to_vec(),
                dirs: subdirs.to_vec(),
            },
        );
    }
    Some(WalkRecord {
        made,
        packages: state,
        package_found,
        dirs,
        verbatim,
        changed: false,
    })
}

/// The line before the package trees' lines.
const PACKAGES_LINE: &[u8] = b"\npackages\n";

/// Where `needle` first is in `bytes`.
fn find(bytes: &[u8], needle: &[u8]) -> Option<usize> {
    bytes.windows(needle.len()).position(|w| w == needle)
}

/// The paths of a NUL-separated list.
fn names_nul(joined: &[u8]) -> impl Iterator<Item = PathBuf> + '_ {
    joined
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| PathBuf::from(OsStr::from_bytes(n)))
}

/// Write the record at `path` (0600 in a 0700 directory), whole or not at all. A
/// directory whose path or names hold a newline is left out (listed afresh each time).
/// Written unnamed (`O_TMPFILE`), named only to be renamed over the record at once; a name
/// a killed writer left is removed by the next one.
fn write_record(path: &Path, record: &WalkRecord) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("/"));
    crate::sys::files::create_private_dir(dir)?;
    remove_stray_temps(dir);
    let temp = dir.join(format!("{TEMP_PREFIX}{}", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut open = std::fs::OpenOptions::new();
    open.write(true).mode(0o600);
    // A file system without unnamed files (overlayfs before Linux 6.6): named from the start.
    let (file, named) = match UNNAMED.map(|flag| open.clone().custom_flags(flag).open(dir)) {
        Some(Ok(file)) => (file, false),
        _ => (open.create_new(true).open(&temp)?, true),
    };
    let mut out = std::io::BufWriter::new(file);
    out.write_all(RECORD_HEADER)?;
    writeln!(
        out,
        "\n{}\n{}",
        record.made,
        record.packages.as_deref().unwrap_or("-")
    )?;
    for found in record
        .package_found
        .iter()
        .map(|p| p.as_os_str().as_bytes())
        .filter(|p| !p.contains(&b'\n'))
    {
        out.write_all(found)?;
        out.write_all(b"\0")?;
    }
    out.write_all(b"\n")?;
    for packages in [false, true] {
        if packages {
            out.write_all(&PACKAGES_LINE[1..])?;
        }
        for (dir, l) in record
            .dirs
            .iter()
            .filter(|(d, _)| in_packages(d) == packages)
        {
            let dir = dir.as_os_str().as_bytes();
            if [dir, &l.files, &l.dirs].iter().any(|b| b.contains(&b'\n')) {
                continue;
            }
            out.write_all(dir)?;
            let [a, b, c, d, e, f] = l.id;
            write!(out, "\0{a} {b} {c} {d} {e} {f}\0")?;
            out.write_all(&l.files)?;
            out.write_all(b"\0")?;
            out.write_all(&l.dirs)?;
            out.write_all(b"\n")?;
        }
    }
    out.write_all(&record.verbatim)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    if !named {
        nix::unistd::linkat(
            nix::fcntl::AT_FDCWD,
            format!("/proc/self/fd/{}", file.as_raw_fd()).as_str(),
            nix::fcntl::AT_FDCWD,
            &temp,
            nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
        )?;
    }
    std::fs::rename(&temp, path)
}

/// How a file is opened unnamed in a directory, where there is a way.
#[cfg(target_os = "linux")]
const UNNAMED: Option<i32> = Some(libc::O_TMPFILE);
#[cfg(not(target_os = "linux"))]
const UNNAMED: Option<i32> = None;

/// The name a record is given just before it is renamed over the last: `TEMP_PREFIX` and
/// the writer's pid.
const TEMP_PREFIX: &str = ".root-only.";

/// Names a writer killed between naming its record and renaming it left in `dir`: those
/// whose process is gone.
fn remove_stray_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix(TEMP_PREFIX))
            .and_then(|p| p.parse::<i32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// uid 0's home directory, from the passwd database.
fn root_home() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(0))
        .ok()
        .flatten()
        .map(|u| u.dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn root_only_is_what_uid_0_reads_and_others_do_not() {
        // /etc/shadow (root:shadow 0640), a host key (0600), a private-key dir (0710).
        assert!(root_only(0, 42, 0o100640, false));
        assert!(root_only(0, 0, 0o100600, false));
        assert!(root_only(0, 108, 0o040710, true));
        // Others read it: not a secret. Root cannot read it without capabilities: nothing
        // to deny (the sandbox cannot read it either).
        assert!(!root_only(0, 0, 0o100644, false));
        assert!(!root_only(0, 0, 0o040755, true));
        assert!(!root_only(0, 0, 0o040711, true));
        assert!(!root_only(999, 999, 0o100600, false));
        assert!(!root_only(0, 0, 0o100000, false));
        // Group root, group-readable.
        assert!(root_only(999, 0, 0o100640, false));
    }

    fn take(record: &mut WalkRecord) -> WalkRecord {
        std::mem::take(record)
    }

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A scratch tree of root's (the unit tests run as root; as another user the files
    /// are not uid 0's and nothing is found, which the test checks too).
    #[test]
    fn the_walk_finds_by_rule_and_reuses_only_what_did_not_change() {
        let base = std::env::temp_dir().join(format!("sbx-rootonly-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        for dir in [
            "etc/app",
            "opt/app/conf",
            "srv/locked/ws",
            "srv/locked/other",
            "home/u",
        ] {
            std::fs::create_dir_all(base.join(dir)).unwrap();
        }
        let write = |rel: &str, m: u32| {
            std::fs::write(base.join(rel), "secret").unwrap();
            mode(&base.join(rel), m);
        };
        write("etc/app/key", 0o600);
        write("etc/app/public", 0o644);
        write("opt/app/conf/token", 0o640);
        write("srv/locked/other/x", 0o644);
        write("home/u/mine", 0o600);
        std::fs::write(base.join("etc/app/lock"), "").unwrap();
        mode(&base.join("etc/app/lock"), 0o600);
        mode(&base.join("srv/locked"), 0o700);
        mode(&base.join("srv/locked/other"), 0o700);
        let kept = [base.join("home/u"), base.join("srv/locked/ws")];
        let rel = |found: &[PathBuf]| -> Vec<String> {
            found
                .iter()
                .map(|p| p.strip_prefix(&base).unwrap().display().to_string())
                .collect()
        };
        let mut first = Walk::new(&kept, None, (1, None));
        first.run(&base);
        let root = nix::unistd::geteuid().is_root();
        let expected = if root {
            vec!["etc/app/key", "opt/app/conf/token", "srv/locked/other"]
        } else {
            vec![]
        };
        // The home and the workspace are kept, and a root-only directory holding one is
        // walked into, not denied.
        assert_eq!(rel(&first.found), expected);
        // Again from the record: the same, and unchanged listings are reused as they are.
        let mut again = Walk::new(&kept, Some(take(&mut first.record)), (2, None));
        again.run(&base);
        assert_eq!(rel(&again.found), expected);
        assert_eq!(again.record.made, 1, "the record's age is the full walk's");
        assert!(!again.record.changed, "nothing was listed again");
        if !root {
            return;
        }
        // A new file changes its directory: found. A directory's mode is always seen.
        write("opt/app/conf/new", 0o600);
        mode(&base.join("etc/app"), 0o700);
        let mut changed = Walk::new(&kept, Some(take(&mut again.record)), (3, None));
        changed.run(&base);
        assert_eq!(
            rel(&changed.found),
            [
                "etc/app",
                "opt/app/conf/new",
                "opt/app/conf/token",
                "srv/locked/other"
            ]
        );
        // A file made root-only in place: not seen from the record, seen without it.
        mode(&base.join("etc/app"), 0o755);
        assert!(changed.record.changed);
        let mut settle = Walk::new(&kept, Some(take(&mut changed.record)), (4, None));
        settle.run(&base);
        mode(&base.join("etc/app/public"), 0o600);
        let mut cached = Walk::new(&kept, Some(take(&mut settle.record)), (5, None));
        cached.run(&base);
        assert!(!rel(&cached.found).contains(&"etc/app/public".to_string()));
        let mut fresh = Walk::new(&kept, None, (6, None));
        fresh.run(&base);
        assert!(rel(&fresh.found).contains(&"etc/app/public".to_string()));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_record_round_trips_and_one_others_could_write_is_not_read() {
        let base = std::env::temp_dir().join(format!("sbx-rootrec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let path = base.join("cache/root-only.json");
        let mut record = WalkRecord {
            made: 7,
            ..WalkRecord::default()
        };
        record.dirs.insert(
            "/etc".into(),
            Listing {
                id: [1, 2, 3, 4, -5, 6],
                files: b"shadow".to_vec(),
                dirs: b"ssh/ssl".to_vec(),
            },
        );
        // A writer killed between naming its record and renaming it left one behind.
        let stray = base.join("cache/.root-only.2147483646");
        std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
        std::fs::write(&stray, "half").unwrap();
        write_record(&path, &record).unwrap();
        let names: Vec<_> = std::fs::read_dir(base.join("cache"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("root-only.json")]);
        let back = read_record(&path, None);
        if nix::unistd::geteuid().is_root() {
            let back = back.unwrap();
            assert_eq!(back.made, 7);
            assert_eq!(back.dirs, record.dirs);
            mode(&path, 0o666);
            assert!(read_record(&path, None).is_none(), "writable by others");
        } else {
            assert!(back.is_none(), "not root's");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
