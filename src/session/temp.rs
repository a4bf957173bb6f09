//! The session's private temporary directory, for Landlock alone in workspace-write, where
//! bwrap would give the program a private `/tmp`: `/tmp/sbx-shell-UID/session-PID`, 0700
//! inside a 0700 directory that must be the user's own. The program gets it as `TMPDIR`
//! (and `TMP`, `TEMP`, `TEMPDIR`); the host's `/tmp` is neither readable nor writable for
//! it. It is removed, with everything in it, when the session ends; what a session that did
//! not end (sbx-shell killed) left is removed by the next one (`session::claim`: its lock,
//! `session-PID.lock` beside it, where the program cannot write, is no longer held).

use std::ffi::OsString;
use std::fs::DirBuilder;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::Path;

/// What `explain` shows for the directory a session would make.
pub const EXAMPLE: &str = "/tmp/sbx-shell-UID/session-PID";
/// And for the directory standing for `/dev/shm` (`create_shm`).
pub const SHM_EXAMPLE: &str = "/dev/shm/sbx-shell-UID/session-PID";

/// The variables that name a temporary directory (tmux's too: it makes its server's
/// socket there, not in `TMPDIR`).
pub const VARIABLES: [&str; 5] = ["TMPDIR", "TMP", "TEMP", "TEMPDIR", "TMUX_TMPDIR"];

/// A session's temporary directory: removed when dropped.
#[derive(Debug)]
pub struct SessionTemp {
    claim: super::claim::Claim,
}

impl SessionTemp {
    /// Make this session's directory under `/tmp`, sweeping what dead sessions left.
    pub fn create() -> io::Result<SessionTemp> {
        Self::create_in(Path::new("/tmp"), std::process::id())
    }

    /// The same under `/dev/shm`: Landlock alone, the session's POSIX shared memory and
    /// semaphores, which the guard makes there for the names the program gives in
    /// `/dev/shm` (`mediator::shm_name`). In memory, as the host's `/dev/shm` is.
    pub fn create_shm() -> io::Result<SessionTemp> {
        Self::create_in(Path::new("/dev/shm"), std::process::id())
    }

    fn create_in(base: &Path, pid: u32) -> io::Result<SessionTemp> {
        let uid = nix::unistd::geteuid().as_raw();
        let user_dir = base.join(format!("sbx-shell-{uid}"));
        match DirBuilder::new().mode(0o700).create(&user_dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        // Another user could have made it first (/tmp is shared): it must be a directory,
        // ours, open to nobody else; it cannot be replaced afterwards (sticky /tmp).
        let meta = std::fs::symlink_metadata(&user_dir)?;
        if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
            return Err(io::Error::other(format!(
                "{} is not a private directory of this user (uid {uid})",
                user_dir.display()
            )));
        }
        let shared = super::claim::Claims::beside(&user_dir, "session-", super::claim::remove_tree);
        let claim = shared.take(&format!("session-{pid}"), &|dir| {
            DirBuilder::new().mode(0o700).create(dir)
        })?;
        Ok(SessionTemp { claim })
    }

    pub fn path(&self) -> &Path {
        self.claim.path()
    }

    /// The program's temporary-directory variables, all naming this directory.
    pub fn env(&self) -> Vec<(String, OsString)> {
        VARIABLES
            .iter()
            .map(|name| (name.to_string(), self.path().as_os_str().to_owned()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sbx-sessiontemp-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn made_private_removed_at_the_end_and_dead_sessions_swept() {
        let base = scratch("life");
        let uid = nix::unistd::geteuid().as_raw();
        let user_dir = base.join(format!("sbx-shell-{uid}"));
        std::fs::create_dir(&user_dir).unwrap();
        std::fs::set_permissions(&user_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A dead session's leftovers (its lock free) and a live one's (its lock held).
        let dead = user_dir.join("session-4194999");
        std::fs::create_dir_all(dead.join("deep")).unwrap();
        std::fs::write(user_dir.join("session-4194999.lock"), "").unwrap();
        let live = user_dir.join(format!("session-{}", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let live_lock =
            std::fs::File::create(user_dir.join(format!("session-{}.lock", std::process::id())))
                .unwrap();
        assert!(crate::sys::files::try_lock(&live_lock, libc::LOCK_EX));
        let temp = SessionTemp::create_in(&base, 1).unwrap();
        assert_eq!(temp.path(), user_dir.join("session-1"));
        let mode = std::fs::metadata(temp.path()).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(!dead.exists(), "a dead session's directory is swept");
        assert!(live.exists(), "a live session's directory is kept");
        assert_eq!(temp.env()[0], ("TMPDIR".into(), temp.path().into()));
        std::fs::write(temp.path().join("f"), "x").unwrap();
        std::os::unix::fs::symlink(&live, temp.path().join("link")).unwrap();
        let path = temp.path().to_path_buf();
        drop(temp);
        assert!(!path.exists());
        assert!(live.exists(), "a symlink inside is not followed");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_directory_someone_else_could_have_made_is_refused() {
        let base = scratch("open");
        let uid = nix::unistd::geteuid().as_raw();
        let user_dir = base.join(format!("sbx-shell-{uid}"));
        std::fs::create_dir(&user_dir).unwrap();
        std::fs::set_permissions(&user_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = SessionTemp::create_in(&base, 1).unwrap_err().to_string();
        assert!(err.contains("not a private directory"), "{err}");
        std::fs::remove_dir(&user_dir).unwrap();
        std::os::unix::fs::symlink(&base, &user_dir).unwrap();
        assert!(SessionTemp::create_in(&base, 1).is_err(), "a symlink");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
