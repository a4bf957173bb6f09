//! How a child's end maps to sbx-shell's own exit code.
//!
//! Shells report a child killed by signal N as 128 + N; sbx-shell does the same so that
//! `sbx-shell -- sh -c 'kill -SEGV $$'` exits 139, exactly like the bare command under bash.

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
