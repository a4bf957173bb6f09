//! The guard's refusals, reported to sbx-shell as they happen (`session::journal`): one
//! line per refusal on an inherited pipe (`HelperSpec::refusals_fd`), written without
//! waiting — a full pipe loses the report, never delays the program's call.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

use crate::policy::refusal::{report_line, Cause};

static REPORTS: OnceLock<OwnedFd> = OnceLock::new();

/// Where this guard's reports go, from now on (once).
pub(super) fn to(fd: OwnedFd) {
    let _ = REPORTS.set(fd);
}

/// Report a refusal of `path` (absolute; a relative one is not reported).
pub(super) fn refused(cause: Cause, path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Some(fd) = REPORTS.get() else { return };
    let line = report_line(cause, path.as_os_str().as_bytes());
    // SAFETY: `line` is valid for its length; a write of at most PIPE_BUF bytes to a
    // pipe is whole or not at all. The pipe is non-blocking: EAGAIN drops the report.
    let _ = unsafe { libc::write(fd.as_raw_fd(), line.as_ptr().cast(), line.len()) };
}
