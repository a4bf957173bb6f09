//! The files sbx-shell writes for itself (the session log, the network log, the probe
//! cache): private to the user — directories 0700, files 0600 — whatever the umask.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// Walk below `dir`, at most `depth` levels down and `budget` entries in all, following no
/// symlink: `visit` sees each entry and says whether to go into it (a directory, by its
/// entry's type). An unreadable directory is passed over.
pub fn walk_bounded(
    dir: &Path,
    depth: usize,
    budget: &mut usize,
    visit: &mut dyn FnMut(&std::fs::DirEntry) -> bool,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let descend = visit(&entry);
        if descend && depth > 1 && entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk_bounded(&entry.path(), depth - 1, budget, visit);
        }
    }
}

/// Create `dir` and its missing parents, 0700; `dir` itself made 0700 when it exists
/// more open (an older sbx-shell, or a `mkdir` under another umask, made it).
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    tighten(&File::open(dir)?, 0o700)
}

/// `file` to `mode` when its group or others have any access, and it is the caller's.
fn tighten(file: &File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = file.metadata()?;
    if meta.mode() & 0o077 != 0 && meta.uid() == nix::unistd::geteuid().as_raw() {
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Create `rel` inside the directory `base` (which must exist): missing directories 0700
/// and, unless `dir`, the last component as an empty 0600 file; what exists is kept.
/// Nothing is followed: a symlink anywhere below `base` fails with `ELOOP` (`ENOTDIR` for
/// a directory), so a sandboxed program that planted one cannot make sbx-shell create
/// anything elsewhere.
pub fn create_inside(base: &Path, rel: &Path, dir: bool) -> io::Result<()> {
    if dir {
        return open_dirs_inside(base, rel).map(drop);
    }
    let (parent, name) = split(rel)?;
    let at = open_dirs_inside(base, parent)?;
    nix::fcntl::openat(
        std::os::fd::AsFd::as_fd(&at),
        name,
        OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    Ok(())
}

/// Copy the regular file `from` to `rel` inside `base` once: only when nothing is there
/// yet (created exclusively, 0600, its directories made as `create_inside` makes them).
/// `Ok(false)` when something is there already or `from` is not a regular file (a symlink
/// included).
pub fn copy_once_inside(from: &Path, base: &Path, rel: &Path) -> io::Result<bool> {
    use std::os::fd::AsFd;
    let source = match nix::fcntl::open(
        from,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => File::from(fd),
        Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ELOOP) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    if !source.metadata()?.is_file() {
        return Ok(false);
    }
    let (parent, name) = split(rel)?;
    let at = open_dirs_inside(base, parent)?;
    let created = nix::fcntl::openat(
        at.as_fd(),
        name,
        OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    );
    let mut target = match created {
        Ok(fd) => File::from(fd),
        Err(nix::errno::Errno::EEXIST) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    io::copy(&mut &source, &mut target)?;
    Ok(true)
}

/// How many of `link_missing_inside`'s links were made, and how many files `from` lacks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Linked {
    pub made: usize,
    pub absent: usize,
}

/// For each `rel` that `base` lacks (no entry there, not even a dangling link) and that is
/// a regular file below `from`: a symlink at `base/rel` to `from/rel`, its directories made
/// as `create_inside` makes them (0700, nothing followed). What is already there is left as
/// it is; a missing `from` links nothing.
pub fn link_missing_inside(
    from: &Path,
    base: &Path,
    rels: &[std::path::PathBuf],
) -> io::Result<Linked> {
    use nix::fcntl::AtFlags;
    use nix::sys::stat::{fstatat, SFlag};
    let mut linked = Linked::default();
    if rels.is_empty() {
        return Ok(linked);
    }
    let look = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let Ok(host) = nix::fcntl::open(from, look, Mode::empty()) else {
        linked.absent = rels.len();
        return Ok(linked);
    };
    let mine = nix::fcntl::open(base, look | OFlag::O_NOFOLLOW, Mode::empty())?;
    for rel in rels {
        if fstatat(&mine, rel, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
            continue;
        }
        let is_file = fstatat(&host, rel, AtFlags::empty()).is_ok_and(|st| {
            SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
        });
        if !is_file {
            linked.absent += 1;
            continue;
        }
        let (parent, name) = split(rel)?;
        let at = open_dirs_inside(base, parent)?;
        match nix::unistd::symlinkat(&from.join(rel), std::os::fd::AsFd::as_fd(&at), name) {
            Ok(()) => linked.made += 1,
            Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(linked)
}

fn split(rel: &Path) -> io::Result<(&Path, &std::ffi::OsStr)> {
    match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(io::ErrorKind::InvalidInput.into()),
    }
}

/// `base`, then each directory of `rel` below it, made 0700 when missing and opened
/// without following a symlink.
fn open_dirs_inside(base: &Path, rel: &Path) -> io::Result<std::os::fd::OwnedFd> {
    use nix::sys::stat::mkdirat;
    use std::os::fd::AsFd;
    let nofollow_dir = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = nix::fcntl::open(base, nofollow_dir, Mode::empty())?;
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        match mkdirat(at.as_fd(), name, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        at = nix::fcntl::openat(at.as_fd(), name, nofollow_dir, Mode::empty())?;
    }
    Ok(at)
}

/// Open `path` for appending, created 0600 (its directory 0700) when missing.
/// Take `file`'s lock (`how`: LOCK_EX or LOCK_SH), without waiting; whether it was taken.
/// A running session holds its own files' locks: that, not a pid (reused, or another pid
/// namespace's), tells a running session's files from a gone one's.
/// The contents of the regular file `name` in the directory `dir` (at most `limit` bytes:
/// more is `EFBIG`) and its metadata. Anything else is never opened — a FIFO's open waits
/// for a writer, a device's may act — so a file that the sandboxed program could replace
/// cannot stall or steer whoever reads it: looked at first, opened without following a
/// symlink or waiting, and looked at again once open.
pub fn read_regular_at(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    limit: u64,
) -> io::Result<(Vec<u8>, nix::sys::stat::FileStat)> {
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::{fstat, fstatat, Mode, SFlag};
    use std::io::Read;
    let regular = |st: &nix::sys::stat::FileStat| {
        SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG
    };
    let seen = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
    if !regular(&seen) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let how = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::openat(dir, name, how, Mode::empty())?;
    let st = fstat(&fd)?;
    if !regular(&st) || (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    if st.st_size as u64 > limit {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    }
    let mut bytes = Vec::new();
    File::from(fd).take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    }
    Ok((bytes, st))
}

/// `read_regular_at` of a path: its directory opened (following symlinks there), the file
/// itself not.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (dir, name) = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => (
            if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            },
            name,
        ),
        _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    };
    let dir = File::open(dir)?;
    use std::os::fd::AsFd;
    read_regular_at(dir.as_fd(), name, limit).map(|(bytes, _)| bytes)
}

/// The peer (slave) of the pty whose master `master` is, opened with `flags`
/// (TIOCGPTPEER: never by a path another could change).
#[cfg(target_os = "linux")]
pub fn pty_peer(
    master: std::os::fd::BorrowedFd<'_>,
    flags: i32,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    const TIOCGPTPEER: libc::c_ulong = 0x5441;
    // SAFETY: TIOCGPTPEER takes open flags by value and returns a new descriptor or -1.
    let peer = unsafe { libc::ioctl(master.as_raw_fd(), TIOCGPTPEER as _, flags) };
    if peer < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(peer) })
}

pub fn try_lock(file: &File, how: i32) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock takes a descriptor of ours and integer flags.
    unsafe { libc::flock(file.as_raw_fd(), how | libc::LOCK_NB) == 0 }
}

/// Whether a running session holds the lock of the file at `path`.
pub fn lock_held(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| !try_lock(&f, libc::LOCK_SH))
}

pub fn append_private(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    tighten(&file, 0o600)?;
    Ok(file)
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

/// sbx-shell's state directory: `$XDG_STATE_HOME/sbx-shell`, else `~/.local/state/sbx-shell`.
pub fn state_dir(home: &Path) -> std::path::PathBuf {
    std::env::var_os("XDG_STATE_HOME")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".local/state"))
        .join("sbx-shell")
}

/// `time` as RFC 3339 in UTC, to the second.
pub fn rfc3339(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(std::time::Duration::ZERO)
        .as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift to eras of 400 years starting on 0000-03-01 (the leap day ends a year).
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Mark every fd above 2 close-on-exec (this process's table only: the flag is the
/// descriptor's, not the open file's, so whoever shares the file is untouched).
pub fn cloexec_above_stderr() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes fd flags.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        if rc == 0 {
            return Ok(());
        }
    }
    // A kernel before 5.11, or macOS: one fd at a time, as listed in /dev/fd.
    let fds: Vec<i32> = std::fs::read_dir("/dev/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_SETFD only changes the fd's flags; a stale fd gives EBADF, ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// The fds a program this process execs would inherit (those not close-on-exec, 0–2
/// among them), each above 2 then marked close-on-exec: listed for passing on, kept from
/// what this process runs itself.
pub fn take_inheritable_fds() -> io::Result<Vec<i32>> {
    let listed: Vec<i32> = std::fs::read_dir("/dev/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let mut fds = Vec::new();
    for fd in listed {
        // SAFETY: F_GETFD only reads the fd's flags; the listing's own fd, closed since,
        // gives EBADF and is left out.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if flags < 0 || flags & libc::FD_CLOEXEC != 0 {
            continue;
        }
        fds.push(fd);
        // SAFETY: F_SETFD only changes the flags of an fd that is open (checked above).
        if fd > 2 && unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fds)
}

/// The inherited descriptor `fd`, owned from here on (closed when dropped), once checked
/// to be open: for a pipe a parent left at a number it named.
pub fn take_inherited(fd: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_GETFD only reads the fd's flags; a number not open gives EBADF.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is open (checked above) and was inherited for this one reader: nothing
    // else in this process uses it, so the OwnedFd owns it and closes it once.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// A close-on-exec copy of `fd` at the lowest number not below `floor`.
pub fn dup_above(fd: std::os::fd::BorrowedFd<'_>, floor: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: F_DUPFD_CLOEXEC makes a new fd of an open one (borrowed); no memory passed.
    let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, floor) };
    if copy < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(copy) })
}

/// `fd` copied to the number `number` (closing what was there), inheritable: for a
/// process about to exec the program that expects it there.
pub fn dup_to(fd: std::os::fd::BorrowedFd<'_>, number: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: dup2 on an open fd (borrowed) to a number this process means to replace.
    if unsafe { libc::dup2(fd.as_raw_fd(), number) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
        // Seeds: copied once, never over what is there, never through a symlink.
        std::fs::write(base.join("outside/src"), "saved").unwrap();
        let src = base.join("outside/src");
        assert!(copy_once_inside(&src, &home, Path::new("st/a.json")).unwrap());
        assert_eq!(
            std::fs::read_to_string(home.join("st/a.json")).unwrap(),
            "saved"
        );
        std::fs::write(home.join("st/a.json"), "newer").unwrap();
        assert!(!copy_once_inside(&src, &home, Path::new("st/a.json")).unwrap());
        assert_eq!(
            std::fs::read_to_string(home.join("st/a.json")).unwrap(),
            "newer"
        );
        std::os::unix::fs::symlink(base.join("outside/dangling"), home.join("st/b.json")).unwrap();
        assert!(!copy_once_inside(&src, &home, Path::new("st/b.json")).unwrap());
        assert!(!base.join("outside/dangling").exists());
        std::os::unix::fs::symlink(&src, home.join("link-src")).unwrap();
        assert!(!copy_once_inside(&home.join("link-src"), &home, Path::new("st/c.json")).unwrap());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn missing_links_are_made_to_the_hosts_files_and_nothing_is_followed() {
        let base = std::env::temp_dir().join(format!("sbx-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (host, mine, outside) = (base.join("host"), base.join("mine"), base.join("outside"));
        for dir in [host.join("c/ab"), mine.clone(), outside.clone()] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(host.join("c/ab/one"), "1").unwrap();
        std::fs::write(host.join("c/ab/two"), "2").unwrap();
        std::fs::create_dir(host.join("c/ab/dir")).unwrap();
        let rels: Vec<std::path::PathBuf> = ["c/ab/one", "c/ab/two", "c/ab/dir", "c/ab/gone"]
            .iter()
            .map(Into::into)
            .collect();
        // What is there already stays; a directory or a missing file is absent.
        std::fs::create_dir_all(mine.join("c/ab")).unwrap();
        std::fs::write(mine.join("c/ab/two"), "mine").unwrap();
        let linked = link_missing_inside(&host, &mine, &rels).unwrap();
        assert_eq!(linked, Linked { made: 1, absent: 2 });
        assert_eq!(std::fs::read_to_string(mine.join("c/ab/one")).unwrap(), "1");
        assert!(mine
            .join("c/ab/one")
            .symlink_metadata()
            .unwrap()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(mine.join("c/ab/two")).unwrap(),
            "mine"
        );
        // Again: nothing to do.
        let again = link_missing_inside(&host, &mine, &rels).unwrap();
        assert_eq!(again, Linked { made: 0, absent: 2 });
        // A directory of the private side replaced by a symlink is not followed.
        std::fs::remove_dir_all(mine.join("c")).unwrap();
        std::os::unix::fs::symlink(&outside, mine.join("c")).unwrap();
        assert!(link_missing_inside(&host, &mine, &rels).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // No host cache: nothing linked.
        let none = link_missing_inside(&base.join("none"), &mine, &rels).unwrap();
        assert_eq!(none, Linked { made: 0, absent: 4 });
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

    #[test]
    fn what_an_older_version_left_open_is_made_private() {
        let base = std::env::temp_dir().join(format!("sbx-tighten-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("state")).unwrap();
        std::fs::write(base.join("state/network.log"), "old\n").unwrap();
        let set = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        set(&base.join("state"), 0o755);
        set(&base.join("state/network.log"), 0o644);
        create_private_dir(&base.join("state")).unwrap();
        append_private(&base.join("state/network.log")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&base.join("state")), 0o700);
        assert_eq!(mode(&base.join("state/network.log")), 0o600);
        // The parents are the user's: left as they are.
        set(&base, 0o755);
        create_private_dir(&base.join("state")).unwrap();
        assert_eq!(mode(&base), 0o755);
        std::fs::remove_dir_all(&base).unwrap();
    }
}

/// The object a path names (device and inode), as sbx-shell saw it when it planned: the
/// helper refuses to go on when it finds another object there (`sandbox::bwrap::Mount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    pub dev: u64,
    pub ino: u64,
}

impl Identity {
    /// Stands for "exists, but only through a symlink where none should be": no object
    /// has it (inode 0 is never used), so a check against it always fails.
    pub const THROUGH_SYMLINK: Identity = Identity {
        dev: u64::MAX,
        ino: 0,
    };
}

/// The identity of what `path` names after following symlinks; `None` when missing.
pub fn followed_identity_of(path: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(Identity {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// What an opened path is.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    Dir,
    Symlink,
    /// A regular file, a socket, a device …
    Other,
}

/// `path` (absolute) opened `O_PATH`, walked one component at a time from `/` without
/// following a symlink anywhere: a symlink in the middle fails (`ENOTDIR`); a symlink at
/// the end is opened as itself (`NodeKind::Symlink`).
#[cfg(target_os = "linux")]
pub fn open_nofollow(path: &Path) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    let mut parts = path.components();
    if parts.next() != Some(std::path::Component::RootDir) {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let names: Vec<&std::ffi::OsStr> = parts
        .map(|part| match part {
            std::path::Component::Normal(name) => Ok(name),
            _ => Err(io::Error::from(io::ErrorKind::InvalidInput)),
        })
        .collect::<io::Result<_>>()?;
    let path_flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = nix::fcntl::open("/", path_flags | OFlag::O_DIRECTORY, Mode::empty())?;
    for (i, name) in names.iter().enumerate() {
        let flags = if i + 1 == names.len() {
            path_flags
        } else {
            path_flags | OFlag::O_DIRECTORY
        };
        at = nix::fcntl::openat(at.as_fd(), *name, flags, Mode::empty())?;
    }
    Ok(at)
}

/// The identity and kind of what `fd` refers to.
#[cfg(target_os = "linux")]
pub fn identify(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<(Identity, NodeKind)> {
    let st = nix::sys::stat::fstat(fd)?;
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => NodeKind::Dir,
        libc::S_IFLNK => NodeKind::Symlink,
        _ => NodeKind::Other,
    };
    Ok((
        Identity {
            dev: st.st_dev,
            ino: st.st_ino,
        },
        kind,
    ))
}

/// The identity of what `path` names, seen without following a symlink; `None` when it
/// is missing, or a symlink (`open_nofollow`).
#[cfg(target_os = "linux")]
pub fn identity_of(path: &Path) -> Option<Identity> {
    use std::os::fd::AsFd;
    let fd = open_nofollow(path).ok()?;
    match identify(fd.as_fd()).ok()? {
        (_, NodeKind::Symlink) => None,
        (id, _) => Some(id),
    }
}

#[cfg(not(target_os = "linux"))]
pub fn identity_of(_path: &Path) -> Option<Identity> {
    None
}

/// The id of the mount `path` lies on (`statx`'s `STATX_MNT_ID`, Linux 5.8): a rename
/// succeeds only within one.
#[cfg(target_os = "linux")]
pub fn mount_id(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: all-zero bytes are a valid statx struct.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a buffer of the size the kernel writes.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MNT_ID,
            &mut buf,
        )
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    if buf.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::from_raw_os_error(libc::ENOSYS));
    }
    Ok(buf.stx_mnt_id)
}

/// A token nobody can guess: 16 random bytes (`random`) in hex.
#[cfg(target_os = "linux")]
pub fn random_token() -> String {
    let mut bytes = [0u8; 16];
    random(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Random bytes from the kernel (`getrandom`); `buf` is left as it was where it refuses.
#[cfg(target_os = "linux")]
pub fn random(buf: &mut [u8]) {
    // SAFETY: getrandom writes at most buf.len() bytes into buf, which is valid for them.
    unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
}
