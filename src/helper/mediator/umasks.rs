//! The programs' umasks, as the guard applies them to the names it makes for them (pure;
//! `create.rs` reads `/proc` and answers `umask()`).
//!
//! A umask belongs to a process (its threads share it) and changes only by `umask()`,
//! which the filter sends to the guard: so it is read from `/proc/PID/status` once per
//! thread (about 11 µs, once per name made before) and then taken from what the process
//! itself set. The guard answers `umask()` by letting it run (its argument is a register,
//! nothing another thread can change), after it noted the new mask.
//!
//! A thread id reused by a new process would find the old one's entry: the tables are
//! emptied when they reach `LIMIT` threads, and a reuse needs the kernel to go round
//! its whole pid space (`pid_max`, 4,194,304) first.

use std::collections::HashMap;

/// Threads remembered before the tables are emptied.
const LIMIT: usize = 4096;

/// What one read of a thread's `/proc/PID/status` says: its process and its umask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    pub tgid: u32,
    pub umask: u32,
}

/// Parse `Tgid:` and `Umask:` from the text of `/proc/PID/status`.
pub fn parse_status(text: &str) -> Option<Status> {
    let field = |name: &str, radix: u32| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u32::from_str_radix(v.trim(), radix).ok())
    };
    Some(Status {
        tgid: field("Tgid:", 10)?,
        umask: field("Umask:", 8)?,
    })
}

#[derive(Debug, Default)]
pub struct Umasks {
    /// Thread → its process.
    process: HashMap<u32, u32>,
    /// Process → its umask.
    mask: HashMap<u32, u32>,
}

impl Umasks {
    /// The umask of thread `tid`; `read` reads its status when it is not known (`None`:
    /// the thread is gone — 022, and nothing is remembered).
    pub fn of(&mut self, tid: u32, read: impl FnOnce() -> Option<Status>) -> u32 {
        if let Some(mask) = self.process.get(&tid).and_then(|p| self.mask.get(p)) {
            return *mask;
        }
        match self.learn(tid, read) {
            Some(tgid) => self.mask.get(&tgid).copied().unwrap_or(0o022),
            None => 0o022,
        }
    }

    /// Thread `tid` calls `umask(new)`: from now on its process's umask is `new`.
    pub fn set(&mut self, tid: u32, new: u32, read: impl FnOnce() -> Option<Status>) {
        if let Some(tgid) = self.learn(tid, read) {
            self.mask.insert(tgid, new & 0o777);
        }
    }

    /// The process of `tid`, read (and its umask noted, unless its process already has
    /// one) when it is not known.
    fn learn(&mut self, tid: u32, read: impl FnOnce() -> Option<Status>) -> Option<u32> {
        if let Some(tgid) = self.process.get(&tid) {
            return Some(*tgid);
        }
        let status = read()?;
        if self.process.len() >= LIMIT {
            self.process.clear();
            self.mask.clear();
        }
        self.process.insert(tid, status.tgid);
        self.mask.entry(status.tgid).or_insert(status.umask & 0o777);
        Some(status.tgid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(tgid: u32, umask: u32) -> impl FnOnce() -> Option<Status> {
        move || Some(Status { tgid, umask })
    }

    fn unread() -> impl FnOnce() -> Option<Status> {
        || panic!("read again")
    }

    #[test]
    fn status_text_gives_the_process_and_the_octal_umask() {
        let text = "Name:\tbash\nUmask:\t0027\nState:\tS (sleeping)\nTgid:\t412\nPid:\t415\n";
        assert_eq!(
            parse_status(text),
            Some(Status {
                tgid: 412,
                umask: 0o027
            })
        );
        assert_eq!(parse_status("Name:\tx\nTgid:\t1\n"), None);
    }

    #[test]
    fn a_thread_is_read_once_and_its_process_shares_what_it_sets() {
        let mut u = Umasks::default();
        assert_eq!(u.of(10, status(10, 0o022)), 0o022);
        assert_eq!(u.of(10, unread()), 0o022);
        // A second thread of the same process: read once for its process, which keeps
        // the umask already known.
        assert_eq!(u.of(11, status(10, 0o022)), 0o022);
        u.set(11, 0o1077, unread());
        assert_eq!(u.of(10, unread()), 0o077, "threads share the umask");
        assert_eq!(u.of(11, unread()), 0o077);
        // A sibling's status read after the change but before the kernel applied it
        // (the old value) does not undo what the process set.
        assert_eq!(u.of(12, status(10, 0o022)), 0o077);
        // Another process keeps its own.
        assert_eq!(u.of(20, status(20, 0o002)), 0o002);
    }

    #[test]
    fn a_gone_thread_gets_the_default_and_is_not_remembered() {
        let mut u = Umasks::default();
        assert_eq!(u.of(5, || None), 0o022);
        u.set(5, 0o077, || None);
        assert_eq!(u.of(5, status(5, 0o002)), 0o002);
    }

    #[test]
    fn the_tables_are_emptied_at_the_limit() {
        let mut u = Umasks::default();
        for tid in 0..LIMIT as u32 {
            u.of(tid, status(tid, 0o022));
        }
        u.of(LIMIT as u32, status(LIMIT as u32, 0o022));
        assert_eq!(u.process.len(), 1);
        assert_eq!(
            u.of(0, status(0, 0o077)),
            0o077,
            "read again after emptying"
        );
    }
}
