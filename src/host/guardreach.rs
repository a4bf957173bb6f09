//! What sbx-shell's guard can do on this machine (`doctor`): measured by a child process the
//! way a run's guard meets its program — the child installs a filter with a listener, the
//! parent reads the child's memory through `/proc/PID/mem` and tries to copy one of its
//! descriptors.

/// The guard's means here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardReach {
    /// Reading a child's memory (as the guard reads what each call names), or why not.
    pub memory: Result<(), String>,
    /// The kernel keeps the caller waiting once the guard has received its call, whatever
    /// signal comes (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`, Linux 5.19).
    pub killable: bool,
    /// The guard may copy a child's descriptors (`pidfd_getfd`; container profiles refuse
    /// it without CAP_SYS_PTRACE), else it reopens them through `/proc`.
    pub copy_fds: bool,
}

#[cfg(target_os = "linux")]
pub fn measure() -> GuardReach {
    linux::measure()
}

#[cfg(not(target_os = "linux"))]
pub fn measure() -> GuardReach {
    GuardReach {
        memory: Err("not Linux".into()),
        killable: false,
        copy_fds: false,
    }
}

#[cfg(target_os = "linux")]
pub use linux::copies;

#[cfg(target_os = "linux")]
mod linux {
    use super::GuardReach;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};
    use std::sync::atomic::{AtomicU8, Ordering};

    /// What the child writes into its copy of this, for the parent to read back: the
    /// parent's own copy stays zero.
    static PROBE: [AtomicU8; 8] = [const { AtomicU8::new(0) }; 8];
    const PATTERN: [u8; 8] = *b"sbxguard";

    pub fn measure() -> GuardReach {
        let failed = |why: String| GuardReach {
            memory: Err(why),
            killable: false,
            copy_fds: false,
        };
        let (Ok((said, say)), Ok((wait, done))) = (nix::unistd::pipe(), nix::unistd::pipe()) else {
            return failed("cannot probe: no pipe".into());
        };
        // SAFETY: the child makes only async-signal-safe calls (atomic stores, prctl,
        // seccomp, read, write) and leaves with _exit.
        let child = unsafe { libc::fork() };
        if child == -1 {
            return failed(format!("cannot probe: {}", std::io::Error::last_os_error()));
        }
        if child == 0 {
            child_side(&say, &wait, done.as_raw_fd());
        }
        drop(say);
        drop(wait);
        let mut killable = [0u8; 1];
        let told = nix::unistd::read(&said, &mut killable).unwrap_or(0) == 1;
        let memory = if told {
            read_back(child)
        } else {
            Err("the probe's child ended early".into())
        };
        let copy_fds = told && copies(child, said.as_raw_fd());
        drop(done);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None);
        GuardReach {
            memory,
            killable: killable[0] == 1,
            copy_fds,
        }
    }

    /// In the child: the pattern written, a filter with a listener installed as the
    /// helper's program side does (killable where the kernel has it), the result said, and
    /// a wait for the parent to be done.
    fn child_side(say: &OwnedFd, wait: &OwnedFd, done: i32) -> ! {
        // SAFETY: closes the child's copy of the parent's end, so that the parent's close
        // ends the wait below.
        unsafe { libc::close(done) };
        for (slot, byte) in PROBE.iter().zip(PATTERN) {
            slot.store(byte, Ordering::SeqCst);
        }
        let fd = crate::sys::kernel::add_listener_filter(crate::sys::seccomp::WAIT_KILLABLE_RECV);
        // SAFETY: write and read use buffers of ours; _exit runs nothing of the parent's.
        unsafe {
            let killable = [u8::from(fd.is_ok())];
            libc::write(say.as_raw_fd(), killable.as_ptr().cast(), 1);
            let mut byte = [0u8; 1];
            libc::read(wait.as_raw_fd(), byte.as_mut_ptr().cast(), 1);
            libc::_exit(0)
        }
    }

    /// The child's copy of `PROBE`, read through its `/proc/PID/mem`.
    fn read_back(child: libc::pid_t) -> Result<(), String> {
        let path = format!("/proc/{child}/mem");
        let mem = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        let mut got = [0u8; 8];
        std::os::unix::fs::FileExt::read_exact_at(&mem, &mut got, PROBE.as_ptr() as u64)
            .map_err(|e| format!("{path}: {e}"))?;
        match got == PATTERN {
            true => Ok(()),
            false => Err(format!("{path}: other bytes than the child wrote")),
        }
    }

    /// Whether `pidfd_getfd` copies descriptor `fd` of process `child` here (container
    /// profiles refuse it without CAP_SYS_PTRACE); the guard asks it at start too.
    pub fn copies(child: libc::pid_t, fd: i32) -> bool {
        use crate::sys::pidfd;
        let Ok(pidfd) = pidfd::open(child as u32, 0) else {
            return false;
        };
        pidfd::get_fd(pidfd.as_fd(), fd as u32).is_ok()
    }
}
