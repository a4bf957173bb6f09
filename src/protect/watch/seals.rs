//! The seals' journal: while a session runs, the recorded files are read-only (sealed);
//! their modes are written to a journal first, so that a session killed while its seals
//! held is undone by the next run (`undo_left_seals`).

use super::record::{chmod, sealed, Content, Item, Recorded};
use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

/// Each file and directory of the record whose mode a seal changes, with its own mode: what
/// a journal keeps (`write_journal`) so that a session killed while sealed is undone.
pub fn sealed_modes(recorded: &[Recorded]) -> Vec<(PathBuf, u32)> {
    fn walk(item: &Item, path: &Path, out: &mut Vec<(PathBuf, u32)>) {
        if let Content::Dir(entries) = &item.kind {
            for (name, inner) in entries {
                walk(inner, &path.join(name), out);
            }
        }
        if matches!(item.kind, Content::File(_) | Content::Dir(_)) && sealed(item.perm) != item.perm
        {
            out.push((path.to_path_buf(), item.perm));
        }
    }
    let mut out = Vec::new();
    for rec in recorded {
        walk(&rec.item, &rec.path, &mut out);
    }
    out
}

/// Write the journal of this process's seals into `dir` (a file named by its pid): one
/// line per path, its own mode in octal and the path's bytes in hex. Written before the
/// seal and removed after the unseal; a session killed between leaves it for
/// `undo_left_seals`.
pub fn write_journal(dir: &Path, modes: &[(PathBuf, u32)]) -> io::Result<PathBuf> {
    use std::fmt::Write as _;
    let mut text = String::new();
    for (path, perm) in modes {
        let hex = path
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .fold(String::new(), |mut h, b| {
                let _ = write!(h, "{b:02x}");
                h
            });
        let _ = writeln!(text, "{perm:o} {hex}");
    }
    let path = dir.join(std::process::id().to_string());
    crate::sys::files::write_private(&path, text.as_bytes())?;
    Ok(path)
}

/// Put back the modes that the journals in `dir` of processes no longer `alive` say were
/// sealed — each path whose mode is still exactly the sealed one (anything else was
/// changed since by someone) — and remove those journals. The paths put back, in order.
pub fn undo_left_seals(dir: &Path, alive: &dyn Fn(u32) -> bool) -> Vec<PathBuf> {
    let mut undone = Vec::new();
    let Ok(journals) = std::fs::read_dir(dir) else {
        return undone;
    };
    for journal in journals.flatten() {
        let Some(pid) = journal
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        let text = std::fs::read_to_string(journal.path()).unwrap_or_default();
        for (path, perm) in text.lines().filter_map(parse_journal_line) {
            if put_back(&path, perm) {
                undone.push(path);
            }
        }
        let _ = std::fs::remove_file(journal.path());
    }
    undone
}

/// `MODE HEX` of `write_journal`.
pub(super) fn parse_journal_line(line: &str) -> Option<(PathBuf, u32)> {
    use std::os::unix::ffi::OsStringExt;
    let (perm, hex) = line.split_once(' ')?;
    let perm = u32::from_str_radix(perm, 8).ok()?;
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((PathBuf::from(OsString::from_vec(bytes)), perm))
}

/// Give `path` the mode `perm` back when it is still sealed from it (never through a
/// symlink).
fn put_back(path: &Path, perm: u32) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let Ok(meta) = path.symlink_metadata() else {
        return false;
    };
    if meta.file_type().is_symlink() || meta.permissions().mode() & 0o7777 != sealed(perm) {
        return false;
    }
    crate::sys::files::open_nofollow(parent).is_ok_and(|dir| chmod(dir.as_fd(), name, perm).is_ok())
}
