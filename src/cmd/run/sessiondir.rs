//! A session's own directory in sbx-shell's state directory, for what the session gives
//! the program (its ssh agent's socket and wrapper, its authority's certificates): one per
//! session and kind, `state/KIND/PID`, a live session's while its lock beside it is held,
//! removed by the session at its end and, when it was killed, by the next session that
//! looks (`session::claim`).

use std::path::Path;

use anyhow::Context as _;

use crate::session::claim::{remove_tree, Claim, Claims};
use crate::sys::exit::Failure;

/// `state/KIND/PID` (or `PID-N` when another pid namespace's session holds that one),
/// made private, its lock taken; those of sessions gone (killed) removed.
pub(super) fn make(home: &Path, kind: &str) -> Result<Claim, Failure> {
    use crate::sys::files::create_private_dir;
    let parent = crate::sys::files::state_dir(home).join(kind);
    create_private_dir(&parent).with_context(|| format!("cannot create {}", parent.display()))?;
    let parent = std::fs::canonicalize(&parent).unwrap_or(parent);
    let pid = std::process::id().to_string();
    let claim = Claims::beside(&parent, "", remove_tree)
        .take(&pid, &|dir| create_private_dir(dir))
        .map_err(|e| super::messages::no_session_dir(&parent, e))?;
    Ok(claim)
}
