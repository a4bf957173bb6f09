//! The guard's reports, as it writes them on its pipe and the journal reads them: one line
//! each, one atomic write — a cause letter and an absolute path, and after a NUL what was
//! refused there (a git config's keys, an address); or a directory of git's state the
//! session touched. `refusal::of_write` judges what a report means.

/// Why the guard refused a name or a writing open, as it reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// The program's own rules do not reach there (Landlock alone).
    Outside,
    /// A protected name or write (`protect::names`).
    Protected,
    /// The kernel answered EROFS: a read-only mount (bwrap).
    ReadOnly,
    /// A unix socket the program may not connect to.
    Socket,
    /// A TCP server on an address other than loopback (Landlock alone); the address is
    /// what the report is about, its path `/`.
    Server,
    /// A TCP connection the program's rules refuse (Landlock alone: it reaches the network
    /// through the proxy only); the address is what the report is about, its path `/`.
    Connect,
    /// A directory the kernel would not remove or rename because it is a mount point
    /// (EBUSY, bwrap): what the sandbox holds in place — a protected or hidden path, or a
    /// directory leading to one.
    Held,
    /// A file only host root may read, opened by root's program where it stays host root
    /// (`mediator::rootreads`).
    RootOnly,
    /// A read the program's own rules refuse (Landlock alone), asked of the guard: root's
    /// program, whose every open is (`mediator::rootreads`).
    Unreadable,
}

impl Cause {
    pub fn code(self) -> char {
        match self {
            Cause::Outside => 'o',
            Cause::Protected => 'p',
            Cause::ReadOnly => 'r',
            Cause::Socket => 's',
            Cause::Server => 'n',
            Cause::Connect => 'c',
            Cause::Held => 'h',
            Cause::RootOnly => 'u',
            Cause::Unreadable => 'e',
        }
    }

    pub fn from_code(c: char) -> Option<Cause> {
        Some(match c {
            'o' => Cause::Outside,
            'p' => Cause::Protected,
            'r' => Cause::ReadOnly,
            's' => Cause::Socket,
            'n' => Cause::Server,
            'c' => Cause::Connect,
            'h' => Cause::Held,
            'u' => Cause::RootOnly,
            'e' => Cause::Unreadable,
            _ => return None,
        })
    }
}

/// One report of the guard: a cause letter and a path, up to the newline.
pub fn parse_report(line: &[u8]) -> Option<(Cause, std::path::PathBuf, String)> {
    use std::os::unix::ffi::OsStrExt;
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let (&code, rest) = line.split_first()?;
    let cause = Cause::from_code(char::from(code))?;
    let (path, about) = match rest.iter().position(|b| *b == 0) {
        Some(i) => (
            &rest[..i],
            String::from_utf8_lossy(&rest[i + 1..]).into_owned(),
        ),
        None => (rest, String::new()),
    };
    (path.first() == Some(&b'/')).then(|| {
        (
            cause,
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path)),
            about,
        )
    })
}

/// The report the guard writes: at most `PIPE_BUF` bytes (one atomic write), a newline in
/// the path shown as `?`.
pub fn report_line(cause: Cause, path: &[u8]) -> Vec<u8> {
    line_of(cause.code() as u8, path)
}

/// `report_line`, with what was refused there after a NUL (a git config's keys), as much
/// as fits.
pub fn report_line_about(cause: Cause, path: &[u8], about: &[u8]) -> Vec<u8> {
    let whole = [path, b"\0", about].concat();
    line_of(cause.code() as u8, &whole)
}

/// The letter of the guard's other report: a directory of git's state that the session
/// touched (`protect::gitstate`), looked at when it ends; `/` for every one in the
/// writable trees.
pub const STATE_CODE: u8 = b't';

/// The report of the state directory `path` (`STATE_CODE`), one atomic write: a path that
/// does not fit in `PIPE_BUF`, or holds a newline, is reported as `/` (every one).
pub fn state_line(path: &[u8]) -> Vec<u8> {
    match path.len() + 2 > PIPE_BUF || path.contains(&b'\n') {
        true => line_of(STATE_CODE, b"/"),
        false => line_of(STATE_CODE, path),
    }
}

/// The state directory a report names (`state_line`), or `None` for any other line.
pub fn parse_state(line: &[u8]) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let path = line.strip_prefix(&[STATE_CODE])?;
    (path.first() == Some(&b'/'))
        .then(|| std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path)))
}

const PIPE_BUF: usize = 4096;

fn line_of(code: u8, path: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(path.len().min(PIPE_BUF - 2) + 2);
    line.push(code);
    line.extend(
        path.iter()
            .take(PIPE_BUF - 2)
            .map(|&b| if b == b'\n' { b'?' } else { b }),
    );
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_a_cause_and_an_absolute_path() {
        let line = report_line(Cause::ReadOnly, b"/home/u/a\nb");
        assert_eq!(line, b"r/home/u/a?b\n");
        assert_eq!(
            parse_report(&line),
            Some((Cause::ReadOnly, "/home/u/a?b".into(), String::new()))
        );
        let line = report_line_about(Cause::Protected, b"/w/.git/config", b"core.fsmonitor");
        assert_eq!(
            parse_report(&line),
            Some((
                Cause::Protected,
                "/w/.git/config".into(),
                "core.fsmonitor".into()
            ))
        );
        assert_eq!(parse_report(b"x/a\n"), None);
        assert_eq!(parse_report(b"rrelative\n"), None);
        assert_eq!(report_line(Cause::Outside, &[b'a'; 9000]).len(), 4096);
    }
}
