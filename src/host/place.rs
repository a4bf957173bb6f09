//! This session's place on the machine (`Place`): the working directory, the terminals,
//! the runtime directory, what kind each path is; and the real filesystem as the policy
//! resolver asks it (`RealFs`).

use crate::policy::PathResolver;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where this session runs.
#[derive(Debug)]
pub struct Place {
    /// The current directory, or why it cannot be read.
    pub cwd: Result<PathBuf, String>,
    /// The per-user temporary directory (`$TMPDIR`, real path).
    pub temp_dir: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR` (real path), when it exists.
    pub runtime_dir: Option<PathBuf>,
    /// The host's unix sockets and runtime directories (`sockets::HostSockets`).
    pub sockets: crate::host::sockets::HostSockets,
    /// macOS: the terminals that exist now (`/dev/ttys*`, the outer one among them), which
    /// Seatbelt denies by name. Empty elsewhere.
    pub terminals: Vec<PathBuf>,
    /// macOS: the terminal on sbx-shell's stdio, the program's own when it has no pty of
    /// its own (it inherits that terminal). `None` elsewhere.
    pub stdio_terminal: Option<PathBuf>,
    /// macOS: the user's per-user directories (`confstr`), real paths. Empty elsewhere.
    pub user_dirs: Vec<PathBuf>,
    kinds: PathKinds,
    identities: RefCell<HashMap<PathBuf, Option<crate::sys::files::Identity>>>,
}

impl Place {
    /// The place, measured now.
    pub fn measure() -> Place {
        let runtime_dir =
            std::env::var_os("XDG_RUNTIME_DIR").and_then(|r| std::fs::canonicalize(r).ok());
        Place {
            cwd: std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}")),
            temp_dir: std::env::var_os("TMPDIR").and_then(|t| std::fs::canonicalize(t).ok()),
            sockets: crate::host::sockets::HostSockets::measure(runtime_dir.as_deref()),
            runtime_dir,
            terminals: darwin::terminals(),
            stdio_terminal: darwin::stdio_terminal(),
            user_dirs: darwin::user_dirs(),
            kinds: PathKinds::default(),
            identities: RefCell::default(),
        }
    }

    /// What `path` is on this host (following symlinks), asked once per path.
    pub fn kind(&self, path: &Path) -> PathKind {
        self.kinds.kind(path)
    }

    /// What `path` names, seen without following a symlink, asked once per path.
    pub fn identity(&self, path: &Path) -> Option<crate::sys::files::Identity> {
        if let Some(id) = self.identities.borrow().get(path) {
            return *id;
        }
        let id = crate::sys::files::identity_of(path);
        self.identities.borrow_mut().insert(path.to_path_buf(), id);
        id
    }
}

/// What the Seatbelt profile needs to know of a Mac (`sandbox::seatbelt::SeatbeltInputs`).
#[cfg(target_os = "macos")]
mod darwin {
    use std::path::PathBuf;

    /// Every `/dev/ttysN` that exists now, and the terminals on sbx-shell's stdio.
    pub fn terminals() -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/dev")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.strip_prefix("ttys")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(|e| e.path())
            .collect();
        found.extend([0, 1, 2].into_iter().filter_map(terminal_on));
        found.sort();
        found.dedup();
        found
    }

    /// The terminal on the first of sbx-shell's stdin, stdout, stderr that has one: what a
    /// child without a pty of its own inherits.
    pub fn stdio_terminal() -> Option<PathBuf> {
        [0, 1, 2].into_iter().find_map(terminal_on)
    }

    pub(super) fn terminal_on(fd: i32) -> Option<PathBuf> {
        use std::os::fd::AsFd;
        match fd {
            0 => nix::unistd::ttyname(std::io::stdin().as_fd()).ok(),
            1 => nix::unistd::ttyname(std::io::stdout().as_fd()).ok(),
            2 => nix::unistd::ttyname(std::io::stderr().as_fd()).ok(),
            _ => None,
        }
    }

    /// The per-user directory and its temporary and cache directories, real paths.
    pub fn user_dirs() -> Vec<PathBuf> {
        [
            libc::_CS_DARWIN_USER_DIR,
            libc::_CS_DARWIN_USER_TEMP_DIR,
            libc::_CS_DARWIN_USER_CACHE_DIR,
        ]
        .into_iter()
        .filter_map(|name| {
            let mut buf = vec![0u8; 1024];
            // SAFETY: confstr writes at most buf.len() bytes, NUL included.
            let n = unsafe { libc::confstr(name, buf.as_mut_ptr().cast(), buf.len()) };
            if n == 0 || n > buf.len() {
                return None;
            }
            buf.truncate(n - 1);
            let path = PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(buf),
            );
            std::fs::canonicalize(path).ok()
        })
        .collect()
    }
}

/// Elsewhere there is no Seatbelt profile to build for the session.
#[cfg(not(target_os = "macos"))]
mod darwin {
    pub fn terminals() -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    pub fn stdio_terminal() -> Option<std::path::PathBuf> {
        None
    }

    pub fn user_dirs() -> Vec<std::path::PathBuf> {
        Vec::new()
    }
}

/// The real filesystem, for symlink resolution. Remembers the directories it resolved: a
/// policy names a hundred paths under a few directories, and `canonicalize` would read
/// every link of every prefix again for each one (startup time).
#[derive(Default)]
pub struct RealFs {
    known: RefCell<HashMap<PathBuf, Option<PathBuf>>>,
}

impl PathResolver for RealFs {
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        if let Some(known) = self.known.borrow().get(path) {
            return known.clone();
        }
        let real = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if path.is_absolute() => {
                let joined = self.real_path(parent)?.join(name);
                match std::fs::symlink_metadata(&joined) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        std::fs::canonicalize(&joined).ok()
                    }
                    Ok(_) => Some(joined),
                    Err(_) => None,
                }
            }
            _ => std::fs::canonicalize(path).ok(),
        };
        self.known
            .borrow_mut()
            .insert(path.to_path_buf(), real.clone());
        real
    }
}

/// The entries of the directory `dir`, but symlinks (none when it cannot be read).
pub fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
        .map(|e| e.path())
        .collect()
}

/// What a path is on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Dir,
    File,
    Missing,
}

/// What each path is, asked once per path: the builders look at every protected and denied
/// path, some more than once.
#[derive(Debug, Default)]
pub(super) struct PathKinds {
    known: RefCell<HashMap<PathBuf, PathKind>>,
}

impl PathKinds {
    pub(super) fn kind(&self, path: &Path) -> PathKind {
        if let Some(kind) = self.known.borrow().get(path) {
            return *kind;
        }
        let kind = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => PathKind::Dir,
            Ok(_) => PathKind::File,
            Err(_) => PathKind::Missing,
        };
        self.known.borrow_mut().insert(path.to_path_buf(), kind);
        kind
    }
}
