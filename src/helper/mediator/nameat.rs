//! A name in a directory the guard holds (`NameAt`): the directory (O_PATH, opened by the
//! guard or one it holds already), its path as the kernel names it, and the name. What
//! the acts make, open and judge (`acting`, `opening`, `making`, `statefiles`).

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A directory the guard opened, or one it holds already (the caller's working directory,
/// the root).
pub(super) enum OpenedDir<'a> {
    Own(OwnedFd),
    Held(BorrowedFd<'a>),
}

impl AsFd for OpenedDir<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            OpenedDir::Own(fd) => fd.as_fd(),
            OpenedDir::Held(fd) => *fd,
        }
    }
}

/// A directory (O_PATH), its path as the kernel names it, and a name in it.
pub(super) struct NameAt<'a> {
    pub(super) dir: OpenedDir<'a>,
    pub(super) path: PathBuf,
    pub(super) name: CString,
}

impl NameAt<'_> {
    /// The entry's own path.
    pub(super) fn full(&self) -> PathBuf {
        joined(&self.path, &self.name)
    }

    pub(super) fn name_os(&self) -> &OsStr {
        OsStr::from_bytes(self.name.as_bytes())
    }
}

/// The path of `name` in the directory at `path`.
pub(super) fn joined(path: &Path, name: &CStr) -> PathBuf {
    path.join(OsStr::from_bytes(name.to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_name_is_named_by_its_directorys_path() {
        let root = std::fs::File::open("/").unwrap();
        let at = NameAt {
            dir: OpenedDir::Held(root.as_fd()),
            path: PathBuf::from("/w/.git"),
            name: CString::new("config").unwrap(),
        };
        assert_eq!(at.full(), PathBuf::from("/w/.git/config"));
        assert_eq!(at.name_os(), "config");
        assert_eq!(at.dir.as_fd().as_raw_fd(), root.as_raw_fd());
    }
}
