//! A session's own directory in sbx-shell's state directory, for what the session gives
//! the program (its ssh agent's socket and wrapper, its authority's certificates): one per
//! session and kind, held by a lock while the session runs, removed by the session at its
//! end and, when it was killed, by the next session that looks.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};

use crate::sys::exit::Failure;

/// `state/KIND/PID` (or `PID-N` when another pid namespace's session holds that one),
/// made private, its lock taken; those of sessions gone (killed) removed.
pub(super) fn make(home: &Path, kind: &str) -> Result<(PathBuf, std::fs::File), Failure> {
    use crate::sys::files::{append_private, create_private_dir, lock_held, try_lock};
    let parent = crate::sys::files::state_dir(home).join(kind);
    create_private_dir(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let parent = std::fs::canonicalize(&parent).unwrap_or(parent);
    for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
        let lock = entry.path().join("lock");
        // A directory without its lock yet may be a session starting this instant.
        let gone = match lock.exists() {
            true => !lock_held(&lock),
            false => entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age.as_secs() > 60)),
        };
        if gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let pid = std::process::id();
    for n in 0..16 {
        let dir = match n {
            0 => parent.join(pid.to_string()),
            n => parent.join(format!("{pid}-{n}")),
        };
        if lock_held(&dir.join("lock")) {
            continue;
        }
        let _ = std::fs::remove_dir_all(&dir);
        let made = create_private_dir(&dir).and_then(|()| append_private(&dir.join("lock")));
        let lock = made.with_context(|| format!("cannot create {}", dir.display()))?;
        if try_lock(&lock, libc::LOCK_EX) {
            return Ok((dir, lock));
        }
    }
    Err(anyhow!(
        "cannot take a directory of its own in {}\nHint: remove what is there",
        parent.display()
    )
    .into())
}
