//! How the guard reads a path argument of a mediated call, decided from the path alone
//! (pure; `create.rs` and `acting.rs` open what it says): where the path starts, and the
//! directory and name its last component splits into, and the path of that directory.

use std::path::{Path, PathBuf};

/// Where a path argument starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start<'a> {
    /// A name in `/dev/shm` (`shm_name`), taken in the session's own directory for it.
    Shm(&'a [u8]),
    /// The program's own descriptor (`/dev/stdout`, `/proc/self/fd/N/…`) and what follows.
    Descriptor(u32, &'a [u8]),
    /// The root: the path is absolute.
    Root,
    /// The directory descriptor the call gave (`AT_FDCWD`: the working directory).
    Dir(i32),
}

/// Where `path` starts for a call given the directory descriptor `dirfd`; `empty_ok`: the
/// call allows an empty path (`AT_EMPTY_PATH`), else that is ENOENT; `shm`: the session
/// has a `/dev/shm` of its own (Landlock alone).
pub fn start_of(path: &[u8], dirfd: i32, empty_ok: bool, shm: bool) -> Result<Start<'_>, i32> {
    if let Some(name) = super::shm_name(path).filter(|_| shm) {
        return Ok(Start::Shm(name));
    }
    if path.is_empty() && !empty_ok {
        return Err(libc::ENOENT);
    }
    if let Some((fd, rest)) = own_descriptor(path) {
        return Ok(Start::Descriptor(fd, rest));
    }
    if path.first() == Some(&b'/') {
        return Ok(Start::Root);
    }
    Ok(Start::Dir(dirfd))
}

/// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N…`, `/proc/self/fd/N…`,
/// `/proc/thread-self/fd/N…`: the descriptor and what follows it.
pub fn own_descriptor(path: &[u8]) -> Option<(u32, &[u8])> {
    for (name, fd) in [
        (&b"/dev/stdin"[..], 0),
        (b"/dev/stdout", 1),
        (b"/dev/stderr", 2),
    ] {
        if path == name {
            return Some((fd, b""));
        }
    }
    let rest = [
        &b"/dev/fd/"[..],
        b"/proc/self/fd/",
        b"/proc/thread-self/fd/",
    ]
    .iter()
    .find_map(|prefix| path.strip_prefix(*prefix))?;
    let end = rest.iter().position(|b| *b == b'/').unwrap_or(rest.len());
    let fd = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let after = rest[end..].strip_prefix(b"/").unwrap_or(&rest[end..]);
    Some((fd, after))
}

/// `path` as the calling thread `tid` means it, for the guard to resolve: `/proc/self/…`
/// and `/proc/thread-self/…` name the caller's own `/proc` entries, not the guard's, and so
/// do `/proc/mounts` and `/proc/net/…`, the kernel's links to `self/mounts` and `self/net`
/// (its own descriptors under their usual spellings are taken from the caller first:
/// `own_descriptor`).
pub fn as_caller(path: &[u8], tid: u32) -> std::borrow::Cow<'_, [u8]> {
    let kept = |rest: &[u8]| rest.is_empty() || rest.starts_with(b"/");
    for prefix in [&b"/proc/self"[..], b"/proc/thread-self"] {
        if let Some(rest) = path.strip_prefix(prefix).filter(|r| kept(r)) {
            let mut out = format!("/proc/{tid}").into_bytes();
            out.extend_from_slice(rest);
            return std::borrow::Cow::Owned(out);
        }
    }
    for link in [&b"/proc/mounts"[..], b"/proc/net"] {
        if path.strip_prefix(link).is_some_and(kept) {
            let mut out = format!("/proc/{tid}").into_bytes();
            out.extend_from_slice(&path[b"/proc".len()..]);
            return std::borrow::Cow::Owned(out);
        }
    }
    std::borrow::Cow::Borrowed(path)
}

/// What a directory of `/proc` is, by the path the kernel gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcDir {
    /// `/proc` itself, whose symlinks (`self`, `thread-self`, `mounts`, `net`) the kernel
    /// resolves for whoever looks: the guard.
    Top,
    /// `/proc/PID/…` (a thread's `/proc/PID/task/TID/…` is its process's).
    Process(u32),
    /// Anything else in `/proc` (`/proc/sys`, `/proc/driver`).
    Other,
}

/// What the directory `path` (a real path in `/proc`) is.
pub fn proc_dir(path: &Path) -> ProcDir {
    use std::os::unix::ffi::OsStrExt;
    let Ok(rest) = path.strip_prefix("/proc") else {
        return ProcDir::Other;
    };
    let Some(first) = rest.iter().next() else {
        return ProcDir::Top;
    };
    match std::str::from_utf8(first.as_bytes()).map(str::parse::<u32>) {
        Ok(Ok(pid)) => ProcDir::Process(pid),
        _ => ProcDir::Other,
    }
}

/// The target of a symlink in `/proc` itself (`self` → `PID`, `thread-self` →
/// `PID/task/TID`, `mounts` → `self/mounts`) read by the guard's thread `tid` of process
/// `pid`, as the calling thread `caller` would have read it: the guard's own ids name the
/// caller's.
pub fn proc_link_as_caller(target: &[u8], pid: u32, tid: u32, caller: u32) -> Vec<u8> {
    // `mounts` and `net` lead through `self`, which the guard would read as its own.
    let own = [
        format!("{pid}/task/{tid}"),
        pid.to_string(),
        "thread-self".into(),
        "self".into(),
    ];
    for prefix in own.iter().map(|p| p.as_bytes()) {
        if let Some(rest) = target.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with(b"/") {
                let mut out = caller.to_string().into_bytes();
                out.extend_from_slice(rest);
                return out;
            }
        }
    }
    target.to_vec()
}

/// The directory a path's last component is in, and that component (trailing slashes
/// dropped); `None` for a path that names its start itself (empty, `.`, `..`, `/`): no
/// name is made there.
pub fn split_last(path: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut trimmed = path;
    while trimmed.len() > 1 && trimmed.ends_with(b"/") {
        trimmed = &trimmed[..trimmed.len() - 1];
    }
    let (dir, name): (&[u8], &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
        Some(0) => (b"/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (b".", trimmed),
    };
    let names_start = name.is_empty() || name == b"." || name == b"..";
    (!names_start).then_some((dir, name))
}

/// The path `rel` names from the directory whose path is `start` (absolute, as the kernel
/// names it), taken word for word: `.` stays, `..` goes up. That is the kernel's own answer
/// when no component of `rel` is a symlink — which the guard has the kernel check while it
/// opens `rel` (`RESOLVE_NO_SYMLINKS`), so that it need not ask the kernel for the path
/// afterwards. An absolute `rel` starts at the root.
pub fn join_plain(start: &Path, rel: &[u8]) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let mut parts: Vec<&[u8]> = Vec::new();
    let from_root = rel.first() == Some(&b'/');
    let start = if from_root {
        &[][..]
    } else {
        start.as_os_str().as_bytes()
    };
    for part in start.split(|b| *b == b'/').chain(rel.split(|b| *b == b'/')) {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            name => parts.push(name),
        }
    }
    let mut path = Vec::with_capacity(start.len() + rel.len() + 1);
    for part in parts {
        path.push(b'/');
        path.extend_from_slice(part);
    }
    if path.is_empty() {
        path.push(b'/');
    }
    PathBuf::from(std::ffi::OsString::from_vec(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_starts_at_the_shm_directory_a_descriptor_the_root_or_the_given_directory() {
        assert_eq!(
            start_of(b"/dev/shm/sem.x", -100, false, true),
            Ok(Start::Shm(b"sem.x"))
        );
        // Without a /dev/shm of the session's own, the host's is an absolute path.
        assert_eq!(
            start_of(b"/dev/shm/sem.x", -100, false, false),
            Ok(Start::Root)
        );
        assert_eq!(
            start_of(b"/dev/shm/../x", -100, false, true),
            Ok(Start::Root)
        );
        assert_eq!(start_of(b"", 3, false, true), Err(libc::ENOENT));
        assert_eq!(start_of(b"", 3, true, true), Ok(Start::Dir(3)));
        assert_eq!(
            start_of(b"/dev/stdout", 3, false, true),
            Ok(Start::Descriptor(1, b""))
        );
        assert_eq!(
            start_of(b"/proc/self/fd/7/sub/x", 3, false, true),
            Ok(Start::Descriptor(7, b"sub/x"))
        );
        assert_eq!(start_of(b"/etc/passwd", 3, false, true), Ok(Start::Root));
        assert_eq!(
            start_of(b"a/b", libc::AT_FDCWD, false, true),
            Ok(Start::Dir(libc::AT_FDCWD))
        );
    }

    #[test]
    fn the_programs_own_descriptors_are_recognised_in_their_usual_spellings() {
        assert_eq!(own_descriptor(b"/dev/stdin"), Some((0, &b""[..])));
        assert_eq!(own_descriptor(b"/dev/stderr"), Some((2, &b""[..])));
        assert_eq!(own_descriptor(b"/dev/fd/12"), Some((12, &b""[..])));
        assert_eq!(
            own_descriptor(b"/proc/thread-self/fd/4/a"),
            Some((4, &b"a"[..]))
        );
        for not in [
            &b"/dev/stdoutx"[..],
            b"/dev/fd/x",
            b"/dev/fd/",
            b"/proc/1/fd/3",
            b"dev/fd/1",
        ] {
            assert_eq!(
                own_descriptor(not),
                None,
                "{}",
                String::from_utf8_lossy(not)
            );
        }
    }

    #[test]
    fn the_callers_proc_self_is_its_own() {
        assert_eq!(&*as_caller(b"/proc/self/cwd/x", 42), b"/proc/42/cwd/x");
        assert_eq!(&*as_caller(b"/proc/thread-self/fd/3", 42), b"/proc/42/fd/3");
        assert_eq!(&*as_caller(b"/proc/self", 42), b"/proc/42");
        assert_eq!(&*as_caller(b"/proc/selfish/x", 42), b"/proc/selfish/x");
        assert_eq!(&*as_caller(b"/etc/x", 42), b"/etc/x");
        assert_eq!(&*as_caller(b"/proc/mounts", 42), b"/proc/42/mounts");
        assert_eq!(&*as_caller(b"/proc/net/tcp", 42), b"/proc/42/net/tcp");
        assert_eq!(&*as_caller(b"/proc/network", 42), b"/proc/network");
        assert_eq!(proc_link_as_caller(b"self/mounts", 1, 1, 42), b"42/mounts");
        assert_eq!(proc_link_as_caller(b"self/net", 1, 1, 42), b"42/net");
        assert_eq!(proc_link_as_caller(b"selfish", 1, 1, 42), b"selfish");
        assert_eq!(&*as_caller(b"proc/self/x", 42), b"proc/self/x");
    }

    #[test]
    fn a_proc_directory_belongs_to_a_process_or_to_proc_itself() {
        assert_eq!(proc_dir(Path::new("/proc")), ProcDir::Top);
        assert_eq!(proc_dir(Path::new("/proc/17/fd")), ProcDir::Process(17));
        assert_eq!(
            proc_dir(Path::new("/proc/17/task/18/fd")),
            ProcDir::Process(17)
        );
        assert_eq!(proc_dir(Path::new("/proc/17")), ProcDir::Process(17));
        assert_eq!(proc_dir(Path::new("/proc/sys/kernel")), ProcDir::Other);
        assert_eq!(proc_dir(Path::new("/proc/1x")), ProcDir::Other);
        assert_eq!(proc_dir(Path::new("/procx/1")), ProcDir::Other);
    }

    #[test]
    fn a_link_of_proc_itself_names_the_caller_not_the_guard() {
        let read = |t: &str| String::from_utf8(proc_link_as_caller(t.as_bytes(), 10, 11, 42));
        assert_eq!(read("10").unwrap(), "42");
        assert_eq!(read("10/task/11").unwrap(), "42");
        assert_eq!(read("10/task/11/fd").unwrap(), "42/fd");
        assert_eq!(read("self/mounts").unwrap(), "42/mounts");
        assert_eq!(read("100").unwrap(), "100");
        assert_eq!(read("10/task/12").unwrap(), "42/task/12");
    }

    #[test]
    fn a_path_without_symlinks_is_joined_word_for_word() {
        let join = |start: &str, rel: &str| join_plain(Path::new(start), rel.as_bytes());
        assert_eq!(join("/ws", "a/b"), Path::new("/ws/a/b"));
        assert_eq!(join("/ws", "./a//b/"), Path::new("/ws/a/b"));
        assert_eq!(join("/ws/a", "../b"), Path::new("/ws/b"));
        assert_eq!(join("/ws", "../../.."), Path::new("/"));
        assert_eq!(join("/", ".."), Path::new("/"));
        assert_eq!(join("/ws", "."), Path::new("/ws"));
        assert_eq!(join("/ws", "/etc/x"), Path::new("/etc/x"));
        assert_eq!(join("/ws", "/"), Path::new("/"));
        assert_eq!(join("/", "a"), Path::new("/a"));
    }

    #[test]
    fn the_last_component_splits_from_its_directory_unless_the_path_names_its_start() {
        assert_eq!(split_last(b"a"), Some((&b"."[..], &b"a"[..])));
        assert_eq!(split_last(b"/a"), Some((&b"/"[..], &b"a"[..])));
        assert_eq!(split_last(b"/a/b/c"), Some((&b"/a/b"[..], &b"c"[..])));
        assert_eq!(split_last(b"a/b//"), Some((&b"a"[..], &b"b"[..])));
        assert_eq!(split_last(b"x/.hidden"), Some((&b"x"[..], &b".hidden"[..])));
        for start in [&b""[..], b".", b"..", b"/", b"//", b"a/.", b"a/..", b"/.."] {
            assert_eq!(
                split_last(start),
                None,
                "{}",
                String::from_utf8_lossy(start)
            );
        }
    }
}
