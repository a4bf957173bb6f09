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

/// Create `rel` inside the directory `base` (which must exist): missing directories 0700
/// and, unless `dir`, the last component as an empty 0600 file; what exists is kept.
/// Nothing is followed: a symlink anywhere below `base` fails with `ELOOP`, so a sandboxed
/// program that planted one in its private home cannot make sbx-shell create anything
/// elsewhere.
pub fn create_inside(base: &Path, rel: &Path, dir: bool) -> io::Result<()> {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    use std::os::fd::AsFd;
    let nofollow_dir = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = nix::fcntl::open(base, nofollow_dir, Mode::empty())?;
    let parts: Vec<_> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        let std::path::Component::Normal(name) = part else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        let last = i + 1 == parts.len();
        if last && !dir {
            openat(
                at.as_fd(),
                *name,
                OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )?;
            return Ok(());
        }
        match mkdirat(at.as_fd(), *name, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        at = openat(at.as_fd(), *name, nofollow_dir, Mode::empty())?;
    }
    Ok(())
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
    fn create_inside_makes_what_is_missing_and_follows_no_symlink() {
        let base = std::env::temp_dir().join(format!("sbx-inside-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("outside")).unwrap();
        let home = base.join("home");
        std::fs::create_dir(&home).unwrap();
        create_inside(&home, Path::new("go/pkg/mod"), true).unwrap();
        create_inside(&home, Path::new(".hist"), false).unwrap();
        std::fs::write(home.join(".hist"), "kept").unwrap();
        create_inside(&home, Path::new(".hist"), false).unwrap();
        assert_eq!(std::fs::read_to_string(home.join(".hist")).unwrap(), "kept");
        assert!(home.join("go/pkg/mod").is_dir());
        // Symlinks planted in the directory lead nowhere.
        std::os::unix::fs::symlink(base.join("outside"), home.join(".cargo")).unwrap();
        std::os::unix::fs::symlink(base.join("outside/x"), home.join(".lesshst")).unwrap();
        let err = create_inside(&home, Path::new(".cargo/registry"), true).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR), "{err}");
        let err = create_inside(&home, Path::new(".lesshst"), false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ELOOP), "{err}");
        assert_eq!(std::fs::read_dir(base.join("outside")).unwrap().count(), 0);
        std::fs::remove_dir_all(&base).unwrap();
    }

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
