//! The process tree on Linux (`process::os`): the supervisor as a child subreaper, and the
//! processes below it through /proc.

use std::io;

use super::{parse_proc_stat, ProcInfo};

/// Become the reaper of every orphan below us.
pub fn install_subreaper() {
    // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// True when we are a child subreaper (Linux): every orphan below us is then re-parented to
/// us, so the processes below us are exactly our children and theirs.
fn is_subreaper() -> bool {
    let mut reaper: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer, which is valid.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut reaper as *mut libc::c_int,
            0,
            0,
            0,
        )
    };
    rc == 0 && reaper != 0
}

/// True when nothing can be left below us: a subreaper without any child, not even an
/// unreaped one. Saves every walk on the common way out.
pub fn no_descendants_left() -> bool {
    if !is_subreaper() {
        return false;
    }
    let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
    let flags = libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: `info` is a writable siginfo_t; WNOWAIT leaves any child's state in place.
    let rc = unsafe { libc::waitid(libc::P_ALL, 0, info.as_mut_ptr(), flags) };
    rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

/// The processes that `select_leftovers` needs to see: as a subreaper, only those below
/// `me`, found through each task's `children` list (a handful of reads instead of one per
/// process on the machine); else every process.
pub fn processes_below(me: i32) -> Vec<ProcInfo> {
    // Without CONFIG_PROC_CHILDREN there are no lists: walk everything rather than miss any.
    let lists = std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists();
    if !is_subreaper() || !lists {
        return list_processes();
    }
    let mut found: Vec<ProcInfo> = Vec::new();
    let mut frontier = vec![me];
    while let Some(pid) = frontier.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children
                .split_ascii_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if found.iter().any(|p| p.pid == child) {
                    continue;
                }
                let stat = std::fs::read_to_string(format!("/proc/{child}/stat"));
                if let Some(info) = stat.ok().and_then(|stat| parse_proc_stat(child, &stat)) {
                    found.push(info);
                    frontier.push(child);
                }
            }
        }
    }
    found
}

/// Every process on the machine, as far as we may see it.
pub fn list_processes() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            parse_proc_stat(pid, &stat)
        })
        .collect()
}
