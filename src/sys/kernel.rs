//! What the kernel offers, asked of it (Linux): Landlock's ABI, and whether a seccomp
//! filter with a listener can be added here.

use std::io;

/// The Landlock ABI version the kernel offers (landlock_create_ruleset, VERSION flag).
pub fn landlock_abi() -> io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel only
    // returns the ABI number; no memory is read or written.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    match abi >= 0 {
        true => Ok(abi),
        false => Err(io::Error::last_os_error()),
    }
}

/// Whether a filter with a listener can be added here: tried in a child process, which
/// installs an allow-all filter with SECCOMP_FILTER_FLAG_NEW_LISTENER and exits with the
/// errno it got (EBUSY: a listener is above this process already).
pub fn listener_free() -> io::Result<()> {
    // SAFETY: the child makes only async-signal-safe system calls, then _exit.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            let code = match add_listener_filter(0) {
                Ok(_) => 0,
                Err(errno) => errno,
            };
            // SAFETY: leaves the child at once, running nothing of the parent's.
            unsafe { libc::_exit(code.min(255)) }
        }
        child => {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is valid.
            unsafe { libc::waitpid(child, &mut status, 0) };
            match libc::WEXITSTATUS(status) {
                0 if libc::WIFEXITED(status) => Ok(()),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        }
    }
}

/// no_new_privs, then a filter that allows every call, with a listener (and the `extra`
/// flags: `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`): the listener's descriptor, or the
/// errno. Only system calls, no allocation: for a forked child about to `_exit`.
pub fn add_listener_filter(extra: libc::c_ulong) -> Result<i64, i32> {
    let allow = libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    };
    let prog = libc::sock_fprog {
        len: 1,
        filter: &allow as *const _ as *mut _,
    };
    // SAFETY: prctl takes plain integers; seccomp reads `prog`, valid here; errno is this
    // thread's.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        let r = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | extra,
            &prog as *const libc::sock_fprog,
        );
        match r >= 0 {
            true => Ok(r),
            false => Err(*libc::__errno_location()),
        }
    }
}
