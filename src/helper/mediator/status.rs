//! What `/proc/TID/status` says of a program's thread, as the guard uses it (pure;
//! `threads.rs` and `waiting.rs` read the file): its process and umask, each process's
//! umask as its own `umask()` calls set it (`Masks`), and whether a signal waits for the
//! thread (`interrupts`).
//!
//! A umask belongs to a process (its threads share it) and changes only by `umask()`,
//! which the filter sends to the guard: so it is read once per thread and then taken from
//! what the process itself set. The guard answers `umask()` by letting it run (its argument
//! is a register, nothing another thread can change), after it noted the new mask.

use std::collections::HashMap;

/// What one read of a thread's `/proc/PID/status` says: its process and its umask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadStatus {
    pub tgid: u32,
    pub umask: u32,
}

/// A field of the status text: its value after the name, parsed in `radix`.
fn field<T>(text: &str, name: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| parse(v.trim()))
}

/// Parse `Tgid:` and `Umask:` from the text of `/proc/PID/status`.
pub fn parse_status(text: &str) -> Option<ThreadStatus> {
    Some(ThreadStatus {
        tgid: field(text, "Tgid:", |v| v.parse().ok())?,
        umask: field(text, "Umask:", |v| u32::from_str_radix(v, 8).ok())?,
    })
}

/// A map keyed by thread or process id, which the guard looks up several times per call.
pub type IdMap<V> =
    HashMap<u32, V, std::hash::BuildHasherDefault<crate::protect::names::FastHasher>>;

/// Each process's umask, by its thread group id.
#[derive(Debug, Default)]
pub struct Masks(IdMap<u32>);

impl Masks {
    /// A thread's status was read. When no other thread of its process is known, the
    /// process is new to the guard (an earlier one with that id is gone): its umask is
    /// what the status says. Else the one known stands — the process may have set it by a
    /// call the guard saw and let run, which the status read may predate.
    pub fn learned(&mut self, status: ThreadStatus, others_known: bool) {
        if !others_known || !self.0.contains_key(&status.tgid) {
            self.0.insert(status.tgid, status.umask & 0o777);
        }
    }

    /// The umask of the process `status` belongs to.
    pub fn of(&self, status: ThreadStatus) -> u32 {
        self.0
            .get(&status.tgid)
            .copied()
            .unwrap_or(status.umask & 0o777)
    }

    /// The process `tgid` calls `umask(new)`.
    pub fn set(&mut self, tgid: u32, new: u32) {
        self.0.insert(tgid, new & 0o777);
    }
}

/// What the status says of the signals that wait for a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signals {
    /// Sent to this thread (`SigPnd`).
    pub thread: u64,
    /// Sent to its process (`ShdPnd`).
    pub process: u64,
    /// Blocked by this thread (`SigBlk`).
    pub blocked: u64,
    /// The process's threads.
    pub threads: u32,
}

/// Parse the pending and blocked signal sets and the thread count.
pub fn parse_signals(text: &str) -> Option<Signals> {
    let hex = |v: &str| u64::from_str_radix(v, 16).ok();
    Some(Signals {
        thread: field(text, "SigPnd:", hex)?,
        process: field(text, "ShdPnd:", hex)?,
        blocked: field(text, "SigBlk:", hex)?,
        threads: field(text, "Threads:", |v| v.parse().ok())?,
    })
}

/// Whether a signal waits that would interrupt the thread's wait, were it waiting in the
/// kernel itself: one sent to the thread, or to its process when it is the process's only
/// thread (of several, another may take it), and not blocked. (Signals the thread ignores
/// never wait: the kernel drops them when they are sent.)
pub fn interrupts(s: &Signals) -> bool {
    let ours = if s.threads == 1 {
        s.thread | s.process
    } else {
        s.thread
    };
    ours & !s.blocked != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_text_gives_the_process_and_the_octal_umask() {
        let text = "Name:\tbash\nUmask:\t0027\nState:\tS (sleeping)\nTgid:\t412\nPid:\t415\n";
        assert_eq!(
            parse_status(text),
            Some(ThreadStatus {
                tgid: 412,
                umask: 0o027
            })
        );
        assert_eq!(parse_status("Name:\tx\nTgid:\t1\n"), None);
    }

    #[test]
    fn a_process_keeps_the_umask_it_set_and_a_new_one_takes_its_own() {
        let status = |tgid, umask| ThreadStatus { tgid, umask };
        let mut m = Masks::default();
        m.learned(status(10, 0o022), false);
        assert_eq!(m.of(status(10, 0o022)), 0o022);
        m.set(10, 0o1077);
        assert_eq!(m.of(status(10, 0o022)), 0o077, "threads share the umask");
        // A sibling's status read after the change but before the kernel applied it
        // (the old value) does not undo what the process set.
        m.learned(status(10, 0o022), true);
        assert_eq!(m.of(status(10, 0o022)), 0o077);
        // Another process keeps its own.
        m.learned(status(20, 0o002), false);
        assert_eq!(m.of(status(20, 0o002)), 0o002);
        // A new process with an old one's id (none of its threads known): its own.
        m.learned(status(10, 0o002), false);
        assert_eq!(m.of(status(10, 0o002)), 0o002);
    }

    #[test]
    fn a_waiting_signal_interrupts_unless_blocked_or_another_thread_may_take_it() {
        let text = "Threads:\t1\nSigQ:\t0/1\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000000004\n";
        let s = parse_signals(text).unwrap();
        assert_eq!(
            s,
            Signals {
                thread: 0,
                process: 2,
                blocked: 0,
                threads: 1
            }
        );
        assert!(interrupts(&s), "SIGINT to a one-thread process");
        assert!(!interrupts(&Signals { blocked: 2, ..s }), "blocked");
        assert!(
            !interrupts(&Signals { threads: 4, ..s }),
            "another thread may take it"
        );
        assert!(interrupts(&Signals {
            thread: 1 << 13,
            threads: 4,
            ..s
        }));
        assert!(!interrupts(&Signals { process: 0, ..s }));
        assert_eq!(parse_signals("Threads:\t1\n"), None);
    }
}
