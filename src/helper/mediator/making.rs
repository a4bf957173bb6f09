//! Every other call that makes a name, done for the program through the directory's
//! descriptor: `mkdir`, `mknod`, `symlink`, `link`, `rename` (and a git config renamed
//! into place, judged by what it says).

use super::acting::{path_of, refuse, Acting, Where};
use super::git::{git_place, is_git};
use super::nameat::NameAt;
use crate::policy::report::Cause;
use crate::protect::gitstate;
use crate::protect::names::{self, GitPlace, Made};
use crate::sys::at::{self, fstat, fstatat, open_path, openat, Res};
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

impl Acting<'_> {
    pub(super) fn mkdir(&self, at: &Where, mode: u32) -> Res<i64> {
        let e = self.entry_of(at)?;
        self.check_new(&e, Made::Dir)?;
        let mode = mode & !self.umask & 0o7777;
        let pooled = super::pool::Pooled::Dir;
        if let Some(made) = self.pool.make(e.dir.as_fd(), &e.name, pooled, 0, mode) {
            return made.map(|_| 0);
        }
        at::mkdirat(e.dir.as_fd(), &e.name, mode).map(|()| 0)
    }

    /// A name removed (`AT_REMOVEDIR`: a directory) where the program's rules let it remove
    /// names (`Reach`, as Landlock judges a removal), and not one a carved directory leaves
    /// out (`sandbox::carve`), done through the directory's descriptor.
    pub(super) fn remove(&self, at: &Where, flags: i32) -> Res<i64> {
        let dir_only = flags & libc::AT_REMOVEDIR != 0;
        let Some(e) = self.entry(self.base(at)?, &at.path)? else {
            // The start itself (`.`, `..`, `/`) or nothing.
            return Err(match (at.path.as_slice(), dir_only) {
                (b"", _) => libc::ENOENT,
                (p, true) if p.ends_with(b".") && !p.ends_with(b"..") => libc::EINVAL,
                (_, true) => libc::EBUSY,
                (_, false) => libc::EISDIR,
            });
        };
        let path = e.full();
        if !self.reach.may_make_in(&e.path) || self.reach.left_out(&path) {
            return Err(refuse(Cause::Outside, &path));
        }
        if at.path.ends_with(b"/") && !dir_only {
            let st = fstatat(e.dir.as_fd(), &e.name)?;
            let is_dir = st.st_mode & libc::S_IFMT == libc::S_IFDIR;
            return Err(if is_dir { libc::EISDIR } else { libc::ENOTDIR });
        }
        self.state.forget(&e.path, &e.name);
        at::unlinkat(e.dir.as_fd(), &e.name, dir_only).map(|()| 0)
    }

    pub(super) fn mknod(&self, at: &Where, mode: u32, dev: u64) -> Res<i64> {
        let e = self.entry_of(at)?;
        self.check_new(&e, Made::Other)?;
        let perm = mode & 0o7777 & !self.umask;
        at::mknodat(e.dir.as_fd(), &e.name, (mode & libc::S_IFMT) | perm, dev).map(|()| 0)
    }

    pub(super) fn symlink(&self, target: &CStr, at: &Where) -> Res<i64> {
        let e = self.entry_of(at)?;
        self.check_new(&e, Made::Other)?;
        at::symlinkat(target, e.dir.as_fd(), &e.name).map(|()| 0)
    }

    pub(super) fn link(&self, old: &Where, new: &Where, flags: i32) -> Res<i64> {
        if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(libc::EINVAL);
        }
        let to = self.entry_of(new)?;
        self.check_new(&to, Made::Other)?;
        if old.path.is_empty() {
            // The object itself: the program's descriptor with AT_EMPTY_PATH, or its own
            // descriptor's magic link followed (`/proc/self/fd/N`, AT_SYMLINK_FOLLOW).
            // Without either, the kernel would link the /proc symlink: another file system.
            if flags & (libc::AT_EMPTY_PATH | libc::AT_SYMLINK_FOLLOW) == 0 {
                return Err(libc::EXDEV);
            }
            // The program's descriptor itself (an O_TMPFILE file given a name): linked
            // through its magic link, as an unprivileged caller does.
            let base = self.base(old)?.fd;
            self.check_link_source(base)?;
            return link_through(base, &to);
        }
        let from = self.entry(self.base(old)?, &old.path)?.ok_or(libc::EPERM)?;
        if flags & libc::AT_SYMLINK_FOLLOW == 0 {
            // The entry itself (a symlink too is linked as one), judged, then linked by its
            // name: nothing can be put at that name meanwhile but by this thread, which
            // makes every name of the program (it can only be removed: then ENOENT).
            let st = fstatat(from.dir.as_fd(), &from.name)?;
            self.check_link_object(&st, &from.full())?;
            return at::linkat(from.dir.as_fd(), &from.name, to.dir.as_fd(), &to.name, 0)
                .map(|()| 0);
        }
        // A symlink followed: the object may lie anywhere. It is opened and judged, then
        // linked through that descriptor (nothing is looked up by name again): a second
        // name of a protected file would let it be written through that name.
        let how = libc::O_PATH | libc::O_CLOEXEC;
        let object = openat(from.dir.as_fd(), &from.name, how, 0)?;
        self.check_link_source(object.as_fd())?;
        link_through(object.as_fd(), &to)
    }

    /// Refuse a new name for `object`: a protected path, a protected file
    /// (`Names::objects`), a git directory's config, or one outside where the program may
    /// make names.
    pub(super) fn check_link_source(&self, object: BorrowedFd<'_>) -> Res<()> {
        // Where the object itself lies (reached through a symlink or the program's
        // descriptor, it may be anywhere): a new name for it needs the right to make and
        // rename names there (Landlock's refer), as for the program.
        self.check_link_object(&fstat(object)?, &path_of(object)?)
    }

    /// `check_link_source` of the object `st` describes, whose path is `at`.
    fn check_link_object(&self, st: &libc::stat, at: &std::path::Path) -> Res<()> {
        let Some(dir) = at.parent().filter(|d| d.is_absolute()) else {
            return Err(libc::EACCES);
        };
        // A new name for git's operation state (`statefiles`): writes through it would
        // reach what the guard placed.
        if let Some(name) = at.file_name() {
            super::acting::touched(dir, name);
            if gitstate::state_file(dir, name.as_bytes()).is_some() {
                return Err(refuse(Cause::Protected, at));
            }
        }
        if !self.reach.may_make_in(dir) || self.reach.left_out(at) {
            return Err(refuse(Cause::Outside, at));
        }
        let config = at.file_name().is_some_and(names::is_config)
            && CString::new(dir.as_os_str().as_bytes())
                .ok()
                .and_then(|d| open_path(crate::sys::at::CWD, &d).ok())
                .is_some_and(|d| is_git(d.as_fd(), dir));
        if config
            || self.names.is_protected_object(st.st_dev, st.st_ino)
            || self.names.protected.iter().any(|p| names::under(at, p))
        {
            return Err(refuse(Cause::Protected, at));
        }
        Ok(())
    }

    pub(super) fn rename(&self, old: &Where, new: &Where, flags: u32) -> Res<i64> {
        let from = self.entry(self.base(old)?, &old.path)?.ok_or(libc::EBUSY)?;
        let to = self.entry(self.base(new)?, &new.path)?.ok_or(libc::EBUSY)?;
        // Whether a directory moves, looked at only where the rules tell the two apart
        // (`names::kind_matters`).
        let made = |e: &NameAt<'_>, into: &NameAt<'_>| {
            if !names::kind_matters(into.name_os()) {
                return Made::Other;
            }
            match fstatat(e.dir.as_fd(), &e.name) {
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => Made::MovedDir,
                _ => Made::Other,
            }
        };
        let moved = made(&from, &to);
        let old_path = from.full();
        if !self.reach.may_make_in(&from.path) {
            return Err(refuse(Cause::Outside, &old_path));
        }
        if self.names.pinned(&old_path) {
            return Err(refuse(Cause::Protected, &old_path));
        }
        // git never renames a config away (only `config.lock` over it).
        let from_name = from.name_os();
        if names::is_config(from_name) {
            if let GitPlace::GitDir { .. } = git_place(from.dir.as_fd(), &from.path, from_name) {
                return Err(refuse(Cause::Protected, &old_path));
            }
        }
        let to_name = to.name_os();
        // git's operation state (`statefiles`): put in place by the guard, judged; never
        // exchanged.
        let state = |e: &NameAt<'_>| gitstate::state_file(&e.path, e.name.as_bytes());
        if let Some(kind) = state(&to) {
            if flags != 0 || moved != Made::Other {
                return Err(refuse(Cause::Protected, &to.full()));
            }
            if let Some(cause) = self.refusal(&to, Made::File) {
                return Err(refuse(cause, &to.full()));
            }
            return self
                .state
                .renamed_onto(from.dir.as_fd(), &from.name, &to, kind);
        }
        if state(&from).is_some() {
            if flags & libc::RENAME_EXCHANGE != 0 {
                return Err(refuse(Cause::Protected, &old_path));
            }
            self.state.forget(&from.path, &from.name);
        }
        if names::is_config(to_name) && flags == 0 && moved == Made::Other {
            if let GitPlace::GitDir { .. } = git_place(to.dir.as_fd(), &to.path, to_name) {
                return self.config_rename(&from, &to);
            }
        }
        self.check(&to, moved)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        if exchange {
            self.check(&from, made(&to, &from))?;
        }
        let (from_dir, to_dir) = (from.dir.as_fd(), to.dir.as_fd());
        at::renameat2(from_dir, &from.name, to_dir, &to.name, flags)?;
        let to_path = to.full();
        let mut moves = vec![(old_path.clone(), to_path.clone())];
        if exchange {
            moves.push((to_path.clone(), old_path.clone()));
        }
        super::report::renamed(&moves);
        let mut renamed = self.renamed.borrow_mut();
        renamed.push(old_path);
        if exchange {
            renamed.push(to_path);
        }
        Ok(0)
    }

    /// git's way of writing a config (`config.lock` renamed over `config`): the new
    /// content is read once, checked (`names::config_rename`), written into a file of the
    /// guard's own, and that file renamed into place; the program's is removed. What the
    /// program does to its file afterwards (it may still hold it open) reaches nothing.
    pub(super) fn config_rename(&self, from: &NameAt<'_>, to: &NameAt<'_>) -> Res<i64> {
        // A regular file only: what is read here is never a FIFO or a device, which
        // would wait or act when opened.
        let (text, st) = crate::sys::at::read_regular(
            from.dir.as_fd(),
            &from.name,
            crate::policy::gitconfig::CONFIG_LIMIT,
        )
        .map_err(|_| libc::EACCES)?;
        self.judge_config(to, &text)?;
        self.place_fresh(to, &text, st.st_mode & 0o7777)?;
        let _ = at::unlinkat(from.dir.as_fd(), &from.name, false);
        Ok(0)
    }

    /// Refuse `text` as the config at `at` where `names::config_rename` does, reported with
    /// the keys refused (the summary names them and the option that allows each; nothing is
    /// said on the program's terminal, which a full-screen program draws on).
    pub(super) fn judge_config(&self, at: &NameAt<'_>, text: &[u8]) -> Res<()> {
        let Some(keys) = self.names.config_rename(&at.path, text) else {
            return Ok(());
        };
        super::report::refused_about(Cause::Protected, &at.full(), keys.join(", ").as_bytes());
        Err(libc::EACCES)
    }

    /// `text` put at `to` as a new file of the guard's own (with `mode`), renamed over
    /// what is there: no descriptor opened before and no link made before reaches what is
    /// there now.
    pub(super) fn place_fresh(&self, to: &NameAt<'_>, text: &[u8], mode: u32) -> Res<()> {
        use std::hash::BuildHasher;
        let temp = CString::new(format!(
            ".sbx-shell-config.{:016x}",
            std::collections::hash_map::RandomState::new().hash_one(self.call.id)
        ))
        .map_err(|_| libc::EINVAL)?;
        let how =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let dir = to.dir.as_fd();
        let file = openat(dir, &temp, how, mode)?;
        let written = std::io::Write::write_all(&mut std::fs::File::from(file), text)
            .map_err(|e| at::os_errno(&e));
        let placed = written.and_then(|()| at::renameat2(dir, &temp, dir, &to.name, 0));
        if let Err(e) = placed {
            let _ = at::unlinkat(dir, &temp, false);
            return Err(e);
        }
        Ok(())
    }
}

/// A new name `to` for the object `object` is open on, made through that descriptor:
/// never by a name looked up again. `AT_EMPTY_PATH` where the kernel lets the opener of a
/// descriptor link it (Linux 6.10), else its magic link (`/proc/self/fd/N`, followed).
fn link_through(object: BorrowedFd<'_>, to: &NameAt<'_>) -> Res<i64> {
    let (to_dir, to) = (to.dir.as_fd(), &*to.name);
    match at::linkat(object, c"", to_dir, to, libc::AT_EMPTY_PATH) {
        Ok(()) => return Ok(0),
        // Before 6.10 (or a descriptor not opened here): through the magic link.
        Err(libc::ENOENT) | Err(libc::EPERM) => {}
        Err(e) => return Err(e),
    }
    let magic =
        CString::new(format!("/proc/self/fd/{}", object.as_raw_fd())).map_err(|_| libc::EINVAL)?;
    at::linkat(at::CWD, &magic, to_dir, to, libc::AT_SYMLINK_FOLLOW).map(|()| 0)
}
