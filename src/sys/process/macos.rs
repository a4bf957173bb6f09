//! The process tree on macOS (`process::os`): no subreaper, so every walk covers every
//! process, through libproc.

use nix::unistd::Pid;

use super::tree::ProcInfo;

/// macOS has no subreaper: a no-op.
pub fn install_subreaper() {}

/// Without a subreaper something may always be left.
pub fn no_descendants_left() -> bool {
    false
}

/// Every process: orphans are re-parented to launchd, not to us.
pub fn processes_below(_me: i32) -> Vec<ProcInfo> {
    list_processes()
}

/// Every process on the machine, through libproc.
pub fn list_processes() -> Vec<ProcInfo> {
    let mut pids = vec![0 as libc::pid_t; 8192];
    let bytes = i32::try_from(pids.len() * std::mem::size_of::<libc::pid_t>()).unwrap_or(i32::MAX);
    // SAFETY: the buffer is valid for `bytes` bytes and libproc writes at most that many.
    let count = unsafe { libc::proc_listallpids(pids.as_mut_ptr().cast(), bytes) };
    pids.truncate(usize::try_from(count).unwrap_or(0));
    pids.into_iter()
        .filter(|pid| *pid > 0)
        .filter_map(macos_proc_info)
        .collect()
}

fn macos_proc_info(pid: libc::pid_t) -> Option<ProcInfo> {
    // SAFETY: proc_bsdinfo is plain old data; all-zero is a valid value.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = i32::try_from(std::mem::size_of::<libc::proc_bsdinfo>()).ok()?;
    // SAFETY: `info` is valid for `size` bytes, which is what PROC_PIDTBSDINFO writes.
    let got = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast(),
            size,
        )
    };
    if got != size {
        return None;
    }
    let sid = nix::unistd::getsid(Some(Pid::from_raw(pid))).ok()?.as_raw();
    let ppid = i32::try_from(info.pbi_ppid).ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        sid,
        zombie: info.pbi_status == libc::SZOMB,
    })
}
