//! How the program's side hands the guard its filter's listener, and the guard checks, before
//! the program runs, that it can do its work (Linux).
//!
//! The program's side sends the listener with a probe: a few random bytes of its own memory
//! and where they are. The guard reads them back the way it reads every call's path
//! (`/proc/PID/mem`) and answers: in order, or the reason it cannot — then the helper
//! stops with that reason and its fix, and nothing runs: never a session in which every
//! name the program makes fails. The guard also learns here whether this machine lets it
//! copy the program's descriptors (`pidfd_getfd`, which container profiles refuse) and
//! whether the program's waits end only by a fatal signal once a call is received
//! (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// What the program's side says with its listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The filter was installed with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`.
    pub killable: bool,
    /// The program's process id (in the guard's pid namespace).
    pub pid: u32,
    /// One of the program's descriptors, to try copying.
    pub fd: u32,
    /// Where the probe bytes are in its memory, and what they are.
    pub addr: u64,
    pub bytes: Vec<u8>,
}

const PROBE_LEN: usize = 16;

impl Probe {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![1u8, u8::from(self.killable)];
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.fd.to_le_bytes());
        out.extend_from_slice(&self.addr.to_le_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Probe> {
        let (head, rest) = bytes.split_at_checked(18)?;
        if head[0] != 1 || rest.len() != PROBE_LEN {
            return None;
        }
        let u32_at = |i: usize| Some(u32::from_le_bytes(head.get(i..i + 4)?.try_into().ok()?));
        Some(Probe {
            killable: head[1] == 1,
            pid: u32_at(2)?,
            fd: u32_at(6)?,
            addr: u64::from_le_bytes(head.get(10..18)?.try_into().ok()?),
            bytes: rest.to_vec(),
        })
    }
}

/// What the guard learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learned {
    pub killable: bool,
    /// `pidfd_getfd` works here: a descriptor of the program's is copied, not reopened.
    pub copy_fds: bool,
}

/// The program's side: send `listener` over `channel` with a probe, and wait for the
/// guard's answer: `Err` with the reason it cannot work.
pub fn offer(channel: &OwnedFd, listener: RawFd, killable: bool) -> io::Result<()> {
    let mut bytes = [0u8; PROBE_LEN];
    // (Zeros, should the kernel refuse: the probe is still read back.)
    crate::sys::files::random(&mut bytes);
    let probe = Probe {
        killable,
        pid: std::process::id(),
        fd: channel.as_raw_fd() as u32,
        addr: bytes.as_ptr() as u64,
        bytes: bytes.to_vec(),
    };
    crate::sys::fdpass::send_fd_with(channel.as_raw_fd(), listener, &probe.encode())?;
    let mut answer = Vec::new();
    let file = std::fs::File::from(channel.try_clone()?);
    Read::take(file, 4096).read_to_end(&mut answer)?;
    // The bytes stay alive (and unchanged) until the guard answered.
    std::hint::black_box(&bytes);
    match answer.split_first() {
        Some((0, _)) => Ok(()),
        Some((_, why)) => Err(io::Error::other(String::from_utf8_lossy(why).into_owned())),
        None => Err(io::Error::other("the guard ended before it answered")),
    }
}

/// The guard's side: take the listener and the probe from `channel`, check the probe and
/// answer it. `Err`: the guard cannot work (the program's side was told why).
pub fn accept(channel: OwnedFd) -> io::Result<(OwnedFd, Learned)> {
    let (listener, payload) = crate::sys::fdpass::receive_fd_with(&channel)?;
    let verdict = Probe::decode(&payload)
        .ok_or_else(|| io::Error::other("the program's side sent no probe"))
        .and_then(|probe| check(&probe).map(|copy_fds| (probe, copy_fds)));
    // Answered, then closed: the program's side reads to the end.
    let mut reply = std::fs::File::from(channel);
    match verdict {
        Ok((probe, copy_fds)) => {
            reply.write_all(&[0])?;
            Ok((
                listener,
                Learned {
                    killable: probe.killable,
                    copy_fds,
                },
            ))
        }
        Err(why) => {
            let _ = reply.write_all(format!("\x01{why}").as_bytes());
            Err(why)
        }
    }
}

/// Read the probe back from the program's memory; whether its descriptors can be copied.
fn check(probe: &Probe) -> io::Result<bool> {
    let path = format!("/proc/{}/mem", probe.pid);
    let read = || -> io::Result<Vec<u8>> {
        let mem = std::fs::File::open(&path)?;
        let mut got = vec![0u8; probe.bytes.len()];
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut got, probe.addr)?;
        Ok(got)
    };
    match read() {
        Ok(got) if got == probe.bytes => {}
        Ok(_) => {
            return Err(io::Error::other(cannot(
                &path,
                "it read other bytes than were there",
            )))
        }
        Err(e) => return Err(io::Error::other(cannot(&path, &e.to_string()))),
    }
    Ok(crate::host::guardreach::copies(
        probe.pid as libc::pid_t,
        probe.fd as i32,
    ))
}

/// Why the guard cannot work, and the fix.
fn cannot(path: &str, why: &str) -> String {
    crate::sys::say::hinted(
        format_args!(
            "the guard cannot read what the program's calls name ({path}: {why}), so every name \
             the program made would fail; nothing ran"
        ),
        reading_fix(),
    )
}

/// What lets the guard read the program's memory here: by Yama's setting.
fn reading_fix() -> String {
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match yama {
        Some(scope) if scope >= 2 => format!(
            "kernel.yama.ptrace_scope is {scope} here, which lets no process read another's \
             memory; set it to 1 (sudo sysctl kernel.yama.ptrace_scope=1), which lets a process \
             read its own children's"
        ),
        _ => "the guard reads the memory of the program it started, as a parent may; \
              `sbx-shell doctor` checks what this machine allows (a /proc mounted with hidepid, \
              or a security module that forbids it, stops it)"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real child of this test, which the kernel keeps the test from reading (it made
    /// itself undumpable, as a program run from a file it may not read is): the check says
    /// so, with the fix.
    #[test]
    fn a_child_whose_memory_cannot_be_read_is_refused_with_the_reason_and_a_hint() {
        static BYTES: [u8; PROBE_LEN] = *b"0123456789abcdef";
        let (wait, done) = nix::unistd::pipe().unwrap();
        // SAFETY: the child makes only async-signal-safe calls (prctl, close, read) and
        // leaves with _exit.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            // SAFETY: as above.
            unsafe {
                libc::close(done.as_raw_fd());
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                let mut byte = [0u8; 1];
                libc::read(wait.as_raw_fd(), byte.as_mut_ptr().cast(), 1);
                libc::_exit(0);
            }
        }
        drop(wait);
        let probe = |pid: i32| Probe {
            killable: true,
            pid: pid as u32,
            fd: 0,
            addr: BYTES.as_ptr() as u64,
            bytes: BYTES.to_vec(),
        };
        // Reading a child that may be read (this test itself) works; the undumpable one's
        // does not, as root too: the guard reads without capabilities.
        let readable = check(&probe(std::process::id() as i32));
        let refused = {
            let _ = crate::helper::mediator::notify::drop_effective_capabilities();
            check(&probe(child))
        };
        drop(done);
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(readable.is_ok(), "{readable:?}");
        let why = refused.unwrap_err().to_string();
        assert!(why.contains(&format!("/proc/{child}/mem")), "{why}");
        assert!(
            why.contains("nothing ran") && why.contains("Hint: "),
            "{why}"
        );
    }

    #[test]
    fn a_probe_survives_its_encoding_and_a_short_one_is_refused() {
        let probe = Probe {
            killable: true,
            pid: 4242,
            fd: 7,
            addr: 0x7ffd_1234_5678,
            bytes: (0..16).collect(),
        };
        assert_eq!(Probe::decode(&probe.encode()), Some(probe.clone()));
        let bytes = probe.encode();
        assert_eq!(Probe::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Probe::decode(&[2u8; 34]), None, "another version");
        assert_eq!(Probe::decode(&[]), None);
    }
}
