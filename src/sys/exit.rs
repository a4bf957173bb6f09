//! sbx-shell's exit codes, all in one place: its own (failure, timeout, not found, not
//! runnable), how a child's end maps to one, and `Failure`, an error with the code it ends
//! sbx-shell with.
//!
//! Shells report a child killed by signal N as 128 + N; sbx-shell does the same so that
//! `sbx-shell -- sh -c 'kill -SEGV $$'` exits 139, exactly like the bare command under bash.

/// An error before the child starts (bad configuration, failed set-up).
pub const FAILURE: u8 = 1;
/// The session reached its timeout (timeout(1)'s code).
pub const TIMEOUT: u8 = 124;
/// The program exists but cannot be run, or the sandbox could not be prepared (as shells
/// report a command that cannot be executed).
pub const NOT_RUNNABLE: u8 = 126;
/// The program was not found (as shells report it).
pub const NOT_FOUND: u8 = 127;

/// An error that ends sbx-shell, with the exit code it ends with.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            code: FAILURE,
            error: error.into(),
        }
    }
}

/// How the direct child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEnd {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by this signal number.
    Signaled(i32),
}

/// The exit code sbx-shell reports for `end`: the child's code, or 128 + the signal.
pub fn exit_code(end: ChildEnd) -> u8 {
    match end {
        ChildEnd::Exited(code) => (code & 0xff) as u8,
        ChildEnd::Signaled(signal) => signal_exit_code(signal),
    }
}

/// 128 + `signal`, the shell convention for "ended by a signal", saturated at 255.
pub fn signal_exit_code(signal: i32) -> u8 {
    u8::try_from(128 + signal.clamp(0, 127)).unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        let table = [
            (ChildEnd::Exited(0), 0),
            (ChildEnd::Exited(7), 7),
            (ChildEnd::Exited(255), 255),
            (ChildEnd::Exited(256), 0),
            (ChildEnd::Signaled(libc::SIGHUP), 129),
            (ChildEnd::Signaled(libc::SIGKILL), 137),
            (ChildEnd::Signaled(libc::SIGSEGV), 139),
            (ChildEnd::Signaled(libc::SIGTERM), 143),
        ];
        for (end, code) in table {
            assert_eq!(exit_code(end), code, "{end:?}");
        }
    }
}
