//! The files sbx-shell writes for itself (the session log, the network log, the probe
//! cache): private to the user — directories 0700, files 0600 — whatever the umask.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Create `dir` and its missing parents, 0700.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Open `path` for appending, created 0600 (its directory 0700) when missing.
pub fn append_private(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Replace `path` with `bytes` at once (a 0600 file renamed over it; its directory 0700).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().ok_or(io::ErrorKind::InvalidInput)?;
    create_private_dir(dir)?;
    let name = path.file_name().ok_or(io::ErrorKind::InvalidInput)?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_are_0600_in_0700_directories_whatever_the_umask() {
        let base = std::env::temp_dir().join(format!("sbx-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        // SAFETY: umask only sets this process's file-creation mask.
        let old = unsafe { libc::umask(0) };
        let file = base.join("a/b/state");
        write_private(&file, b"one").unwrap();
        write_private(&file, b"two").unwrap();
        append_private(&base.join("c/log"))
            .unwrap()
            .write_all(b"x")
            .unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&base.join("c/log")), 0o600);
        for dir in ["a", "a/b", "c"] {
            assert_eq!(mode(&base.join(dir)), 0o700, "{dir}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
