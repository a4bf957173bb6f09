//! The calling thread's capability sets (Linux): read and written through capget/capset
//! in the v3 layout. Capabilities are per thread: the helper drops them for the program,
//! the mediator's thread clears its effective set.

use std::io;

#[repr(C)]
struct Header {
    version: u32,
    pid: libc::c_int,
}

/// One 32-bit half of the three sets (index 0: capabilities 0–31, 1: 32–63).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sets {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

const VERSION_3: u32 = 0x2008_0522;

/// CAP_SETGID, CAP_SETUID and CAP_SETPCAP (Linux's numbers).
pub const SETGID: u32 = 6;
pub const SETUID: u32 = 7;
pub const SETPCAP: u32 = 8;
pub const SETFCAP: u32 = 31;

/// Whether this thread may switch its ids (both CAP_SETUID and CAP_SETGID permitted).
pub fn can_switch_ids() -> bool {
    let both = (1 << SETUID) | (1 << SETGID);
    get().is_ok_and(|sets| sets[0].permitted & both == both)
}

fn header() -> Header {
    Header {
        version: VERSION_3,
        pid: 0,
    }
}

/// This thread's sets.
pub fn get() -> io::Result<[Sets; 2]> {
    let mut header = header();
    let mut data = [Sets::default(); 2];
    // SAFETY: capget reads `header` and writes two Sets (the v3 layout) into `data`.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

/// Set this thread's sets to `data`.
pub fn set(data: &[Sets; 2]) -> io::Result<()> {
    let mut header = header();
    // SAFETY: capset reads `header` and two Sets (the v3 layout) from `data`.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_read_can_be_written_back() {
        let sets = get().unwrap();
        set(&sets).unwrap();
        assert_eq!(get().unwrap(), sets);
    }
}
