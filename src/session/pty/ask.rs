//! Questions to the user on the outer terminal, from another thread (the ssh agent's
//! confirmation of each signature): the asker blocks until the relay has shown the
//! question and read the answer — the next key typed, which the program never sees — or
//! until a deadline. One question at a time.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a question waits for its answer before it counts as "no".
pub const DEADLINE: Duration = Duration::from_secs(60);

#[derive(Default)]
struct QuestionState {
    /// The question waiting to be shown or answered, with its number.
    asked: Option<(u64, String)>,
    /// The last answer given, for question number `.0`.
    answer: Option<(u64, bool)>,
    next: u64,
    /// The relay is gone (or never had a terminal to ask on): every answer is "no".
    closed: bool,
}

struct Questions {
    state: Mutex<QuestionState>,
    changed: Condvar,
    /// Written once per question: wakes the relay's poll.
    wake: OwnedFd,
}

/// The asking side, for any thread.
#[derive(Clone)]
pub struct Asker(Arc<Questions>);

/// The relay's side: the pipe to poll, the question to show, the answer to give.
pub struct Desk {
    shared: Arc<Questions>,
    woken: OwnedFd,
    /// The question the relay has shown and waits to be answered.
    pub showing: Option<u64>,
}

pub fn pair() -> std::io::Result<(Asker, Desk)> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
    let (woken, wake) = nix::unistd::pipe()?;
    for fd in [&woken, &wake] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    }
    let shared = Arc::new(Questions {
        state: Mutex::new(QuestionState::default()),
        changed: Condvar::new(),
        wake,
    });
    Ok((
        Asker(shared.clone()),
        Desk {
            shared,
            woken,
            showing: None,
        },
    ))
}

impl Asker {
    /// Ask `question`; true only for a "y" typed before `DEADLINE`.
    pub fn ask(&self, question: &str) -> bool {
        let shared = &self.0;
        let until = Instant::now() + DEADLINE;
        let Ok(mut state) = shared.state.lock() else {
            return false;
        };
        // One question at a time.
        while state.asked.is_some() && !state.closed {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = match shared.changed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(_) => return false,
            };
        }
        if state.closed {
            return false;
        }
        state.next += 1;
        let id = state.next;
        state.asked = Some((id, question.to_string()));
        let _ = nix::unistd::write(&shared.wake, b"?");
        loop {
            if let Some((answered, yes)) = state.answer {
                if answered == id {
                    state.asked = None;
                    shared.changed.notify_all();
                    return yes;
                }
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || state.closed {
                state.asked = None;
                shared.changed.notify_all();
                return false;
            }
            state = match shared.changed.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(_) => return false,
            };
        }
    }
}

impl Drop for Desk {
    fn drop(&mut self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.closed = true;
            self.shared.changed.notify_all();
        }
    }
}

impl std::fmt::Debug for Desk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Desk")
    }
}

impl Desk {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.woken.as_fd()
    }

    /// After the pipe woke the relay: the question to show now, if one waits unshown.
    pub fn next_question(&mut self) -> Option<String> {
        let mut buf = [0u8; 64];
        while matches!(nix::unistd::read(&self.woken, &mut buf), Ok(1..)) {}
        let state = self.shared.state.lock().ok()?;
        let (id, question) = state.asked.clone()?;
        if self.showing == Some(id) {
            return None;
        }
        self.showing = Some(id);
        Some(question)
    }

    /// The answer to the question shown.
    pub fn answer(&mut self, yes: bool) {
        let Some(id) = self.showing.take() else {
            return;
        };
        if let Ok(mut state) = self.shared.state.lock() {
            state.answer = Some((id, yes));
            self.shared.changed.notify_all();
        }
    }

    /// Whether the question shown is still waiting (its asker may have given up).
    pub fn still_asked(&self) -> bool {
        let Some(id) = self.showing else {
            return false;
        };
        self.shared
            .state
            .lock()
            .is_ok_and(|s| s.asked.as_ref().is_some_and(|(a, _)| *a == id))
    }
}

/// The answer a typed byte gives.
pub fn is_yes(byte: u8) -> bool {
    byte == b'y' || byte == b'Y'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_shown_once_and_answered() {
        let (asker, mut desk) = pair().unwrap();
        let t = std::thread::spawn(move || asker.ask("sign?"));
        let mut shown = None;
        for _ in 0..500 {
            let mut fds = [nix::poll::PollFd::new(
                desk.fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            let _ = nix::poll::poll(&mut fds, 10u16);
            if let Some(q) = desk.next_question() {
                shown = Some(q);
                break;
            }
        }
        assert_eq!(shown.as_deref(), Some("sign?"));
        assert_eq!(desk.next_question(), None);
        assert!(desk.still_asked());
        desk.answer(true);
        assert!(t.join().unwrap());
        assert!(is_yes(b'y') && !is_yes(b'n') && !is_yes(b'\r'));
    }

    #[test]
    fn without_a_relay_the_answer_is_no_at_once() {
        let (asker, desk) = pair().unwrap();
        drop(desk);
        let started = Instant::now();
        assert!(!asker.ask("sign?"));
        assert!(started.elapsed() < Duration::from_secs(1));
    }
}
