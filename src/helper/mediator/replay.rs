//! Kernels before Linux 5.19, which have no `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`: any
//! signal ends the program's wait for the guard's answer, also after the guard received
//! the call and acted. The kernel then restarts the call (`SA_RESTART`) or fails it with
//! `EINTR`. So an answer that reached nobody is kept for its thread (`Replay`), and when
//! that thread makes the same call again — same number, same arguments: the restart —
//! it gets that answer, and the act is not done twice (a second `mkdir` would fail with
//! `EEXIST`, a second `rename` with `ENOENT`). Any other call of the thread drops what
//! was kept. What remains on those kernels: a handler without `SA_RESTART` can get `EINTR`
//! from a call whose act was done (the name is there).

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use super::notify::Call;

/// Threads with an answer kept, at most.
const LIMIT: usize = 64;

/// What an act gave that did not reach the program.
pub(super) enum Given {
    Value(i64),
    /// A descriptor to hand over (close-on-exec or not).
    Fd(OwnedFd, bool),
}

struct KeptAnswer {
    nr: i64,
    args: [u64; 6],
    outcome: Given,
}

#[derive(Default)]
pub(super) struct Replay {
    /// Off where the kernel keeps the program waiting once a call is received.
    on: bool,
    kept: HashMap<u32, KeptAnswer>,
}

impl Replay {
    pub(super) fn new(killable: bool) -> Replay {
        Replay {
            on: !killable,
            kept: HashMap::new(),
        }
    }

    /// What was kept for `call`'s thread when `call` is the one it was kept for (the
    /// restart); whatever was kept for the thread is dropped either way.
    pub(super) fn take(&mut self, call: &Call) -> Option<Given> {
        let kept = self.kept.remove(&call.pid)?;
        (kept.nr == call.nr && kept.args == call.args).then_some(kept.outcome)
    }

    /// `outcome` of `call` reached nobody: keep it for the restart.
    pub(super) fn keep(&mut self, call: &Call, outcome: Given) {
        if !self.on {
            return;
        }
        if self.kept.len() >= LIMIT {
            self.kept.clear();
        }
        self.kept.insert(
            call.pid,
            KeptAnswer {
                nr: call.nr,
                args: call.args,
                outcome,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(pid: u32, nr: i64, arg: u64) -> Call {
        Call {
            id: 1,
            pid,
            nr,
            args: [arg, 0, 0, 0, 0, 0],
        }
    }

    #[test]
    fn a_restart_gets_the_answer_kept_and_anything_else_drops_it() {
        let mut r = Replay::new(false);
        r.keep(&call(7, 83, 0x10), Given::Value(0));
        assert!(r.take(&call(8, 83, 0x10)).is_none(), "another thread");
        assert!(matches!(r.take(&call(7, 83, 0x10)), Some(Given::Value(0))));
        assert!(r.take(&call(7, 83, 0x10)).is_none(), "given once");
        r.keep(&call(7, 83, 0x10), Given::Value(0));
        assert!(r.take(&call(7, 83, 0x20)).is_none(), "another call");
        assert!(r.take(&call(7, 83, 0x10)).is_none(), "dropped by it");
    }

    #[test]
    fn nothing_is_kept_where_the_kernel_keeps_the_program_waiting() {
        let mut r = Replay::new(true);
        r.keep(&call(7, 83, 0x10), Given::Value(0));
        assert!(r.take(&call(7, 83, 0x10)).is_none());
    }
}
