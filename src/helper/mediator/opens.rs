//! What an `open` the guard does for the program means, flag by flag, as the kernel would
//! do it for the program itself (pure; `create.rs` acts on it).
//!
//! The guard opens what the program asked for through a directory it resolved, never by
//! the program's path again: so the flags that name how to look the path up (`O_CREAT`,
//! `O_EXCL`, `O_NOFOLLOW`) are its own to apply, and the rest is passed on.

/// What the guard does for an open of a name that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Make it (exclusively, so that nothing made meanwhile is taken over) with this mode.
    Create { flags: i32, mode: u32 },
    /// Fail as the kernel fails: without `O_CREAT` a missing name is `ENOENT`, whatever
    /// else the flags ask (writing, appending, truncating).
    Fail(i32),
}

/// An open of a missing name with `flags` and `mode`, by a program whose umask `umask`
/// gives (asked only when something is made: reading it costs).
pub fn missing(flags: i32, mode: u32, umask: impl FnOnce() -> u32) -> Missing {
    if flags & libc::O_CREAT == 0 {
        return Missing::Fail(libc::ENOENT);
    }
    Missing::Create {
        flags: flags | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        mode: mode & !umask() & 0o7777,
    }
}

/// The flags with which the guard opens an existing file for the program, or the error
/// the kernel gives: `O_EXCL` with `O_CREAT` is `EEXIST`. The file is opened by its
/// directory and name, never following a symlink there (the guard followed it by hand).
pub fn existing(flags: i32) -> Result<i32, i32> {
    if flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 {
        return Err(libc::EEXIST);
    }
    Ok((flags & !(libc::O_CREAT | libc::O_EXCL)) | libc::O_NOFOLLOW | libc::O_CLOEXEC)
}

/// Whether an open with `flags` writes (or truncates): what the guard judges.
pub fn writes(flags: i32) -> bool {
    flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0
}

/// At most this many symlinks are followed in the last component (as the kernel's 40).
pub const MAX_LINKS: usize = 40;

/// What the last component of an open's path names now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum There {
    Nothing,
    Symlink,
    Fifo,
    /// A file, a directory, a device, a socket.
    Other,
}

impl There {
    /// What a `st_mode` describes.
    pub fn of(mode: libc::mode_t) -> There {
        match mode & libc::S_IFMT {
            libc::S_IFLNK => There::Symlink,
            libc::S_IFIFO => There::Fifo,
            _ => There::Other,
        }
    }
}

/// The guard's next step in an open, by what is there, the flags, and how many symlinks
/// it followed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenStep {
    /// Answer this errno, as the kernel would.
    Refuse(i32),
    /// Follow the symlink.
    Follow,
    /// Open the FIFO with these flags (in a thread of its own: it waits for the other end).
    OpenFifo(i32),
    /// Open what is there with these flags, once it is judged.
    OpenExisting(i32),
    /// Make the name (`missing`), once it is judged.
    Create,
}

/// The next step of an open with `flags` where the last component names `there`, after
/// `links` symlinks followed: O_EXCL (with O_CREAT) refuses whatever exists, a symlink
/// too; O_NOFOLLOW refuses a symlink (ELOOP), as does the 41st; without O_CREAT a missing
/// name is ENOENT.
pub fn step(there: There, flags: i32, links: usize) -> OpenStep {
    let how = existing(flags);
    match (there, how) {
        (There::Nothing, _) if flags & libc::O_CREAT == 0 => OpenStep::Refuse(libc::ENOENT),
        (There::Nothing, _) => OpenStep::Create,
        (_, Err(err)) => OpenStep::Refuse(err),
        (There::Symlink, _) if flags & libc::O_NOFOLLOW != 0 => OpenStep::Refuse(libc::ELOOP),
        (There::Symlink, _) if links >= MAX_LINKS => OpenStep::Refuse(libc::ELOOP),
        (There::Symlink, _) => OpenStep::Follow,
        (There::Fifo, Ok(how)) => OpenStep::OpenFifo(how),
        (There::Other, Ok(how)) => OpenStep::OpenExisting(how),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libc::{O_APPEND, O_CREAT, O_EXCL, O_RDONLY, O_RDWR, O_TRUNC, O_WRONLY};

    #[test]
    fn a_missing_name_is_made_only_with_o_creat_and_gets_the_mode_asked_less_the_umask() {
        for flags in [
            O_WRONLY,
            O_RDWR,
            O_WRONLY | O_APPEND,
            O_WRONLY | O_TRUNC,
            O_RDONLY,
        ] {
            let umask = || panic!("no umask is read for {flags:o}");
            assert_eq!(
                missing(flags, 0o644, umask),
                Missing::Fail(libc::ENOENT),
                "{flags:o}"
            );
        }
        for (flags, mode, umask, want) in [
            (O_WRONLY | O_CREAT, 0o666, 0o022, 0o644),
            (O_RDWR | O_CREAT | O_EXCL, 0o600, 0o077, 0o600),
            (O_WRONLY | O_CREAT | O_TRUNC, 0o764, 0o027, 0o740),
            (O_WRONLY | O_CREAT, 0o4755, 0o022, 0o4755),
            (O_WRONLY | O_CREAT, 0o100644, 0, 0o644),
        ] {
            match missing(flags, mode, || umask) {
                Missing::Create {
                    flags: how,
                    mode: got,
                } => {
                    assert_eq!(got, want, "{flags:o} {mode:o} {umask:o}");
                    assert!(how & O_EXCL != 0 && how & libc::O_NOFOLLOW != 0);
                    assert_eq!(how & libc::O_ACCMODE, flags & libc::O_ACCMODE);
                }
                other => panic!("{flags:o}: {other:?}"),
            }
        }
    }

    #[test]
    fn an_existing_file_is_opened_as_asked_and_o_excl_fails() {
        assert_eq!(existing(O_WRONLY | O_CREAT | O_EXCL), Err(libc::EEXIST));
        let how = existing(O_WRONLY | O_CREAT | O_TRUNC | O_APPEND).unwrap();
        assert_eq!(how & (O_CREAT | O_EXCL), 0);
        assert!(how & O_TRUNC != 0 && how & O_APPEND != 0 && how & libc::O_NOFOLLOW != 0);
        // O_EXCL without O_CREAT is ignored by the kernel for regular files.
        assert!(existing(O_RDONLY | O_EXCL).is_ok());
        assert!(writes(O_WRONLY) && writes(O_RDWR) && writes(O_RDONLY | O_TRUNC));
        assert!(!writes(O_RDONLY));
    }

    #[test]
    fn an_open_follows_opens_makes_or_refuses_as_the_kernel_would() {
        use libc::{EEXIST, ELOOP, ENOENT, O_NOFOLLOW};
        let how = |f: i32| existing(f).unwrap();
        // Nothing there: made only with O_CREAT.
        assert_eq!(step(There::Nothing, O_RDONLY, 0), OpenStep::Refuse(ENOENT));
        assert_eq!(
            step(There::Nothing, O_WRONLY | O_TRUNC, 0),
            OpenStep::Refuse(ENOENT)
        );
        assert_eq!(
            step(There::Nothing, O_WRONLY | O_CREAT, 0),
            OpenStep::Create
        );
        assert_eq!(
            step(There::Nothing, O_WRONLY | O_CREAT | O_EXCL, 0),
            OpenStep::Create
        );
        // O_CREAT|O_EXCL: whatever is there, a dangling symlink too, is EEXIST.
        for there in [There::Symlink, There::Fifo, There::Other] {
            assert_eq!(
                step(there, O_WRONLY | O_CREAT | O_EXCL, 0),
                OpenStep::Refuse(EEXIST)
            );
        }
        // O_EXCL alone means nothing here.
        assert_eq!(
            step(There::Other, O_RDONLY | O_EXCL, 0),
            OpenStep::OpenExisting(how(O_RDONLY))
        );
        // Symlinks: followed, unless O_NOFOLLOW or the 41st.
        assert_eq!(step(There::Symlink, O_RDONLY, 0), OpenStep::Follow);
        assert_eq!(
            step(There::Symlink, O_WRONLY | O_CREAT, 39),
            OpenStep::Follow
        );
        assert_eq!(
            step(There::Symlink, O_RDONLY, MAX_LINKS),
            OpenStep::Refuse(ELOOP)
        );
        assert_eq!(
            step(There::Symlink, O_RDONLY | O_NOFOLLOW, 0),
            OpenStep::Refuse(ELOOP)
        );
        // What exists is opened without O_CREAT, never following a symlink (done by hand).
        let flags = O_WRONLY | O_CREAT | O_TRUNC;
        assert_eq!(
            step(There::Other, flags, 0),
            OpenStep::OpenExisting(how(flags))
        );
        assert_eq!(how(flags) & (O_CREAT | O_NOFOLLOW), O_NOFOLLOW);
        assert_eq!(
            step(There::Fifo, O_WRONLY, 0),
            OpenStep::OpenFifo(how(O_WRONLY))
        );
    }

    #[test]
    fn what_is_there_is_read_from_the_mode() {
        assert_eq!(There::of(libc::S_IFLNK | 0o777), There::Symlink);
        assert_eq!(There::of(libc::S_IFIFO | 0o600), There::Fifo);
        for other in [
            libc::S_IFREG,
            libc::S_IFDIR,
            libc::S_IFCHR,
            libc::S_IFSOCK,
            libc::S_IFBLK,
        ] {
            assert_eq!(There::of(other | 0o644), There::Other);
        }
    }
}
