//! The process tree as plain data: what one process is to the walks (`ProcInfo`, parsed
//! from `/proc/PID/stat`), and which of them a walk selects. Pure.

/// The process `depth` generations below `root`, if each generation has exactly one live
/// process (a launcher's chain).
pub fn only_child_chain(procs: &[ProcInfo], root: i32, depth: usize) -> Option<i32> {
    let mut pid = root;
    for _ in 0..depth {
        let mut children = procs.iter().filter(|p| p.ppid == pid && !p.zombie);
        let only = children.next()?;
        if children.next().is_some() {
            return None;
        }
        pid = only.pid;
    }
    Some(pid)
}

/// One process as the tree walk needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub ppid: i32,
    pub sid: i32,
    pub zombie: bool,
}

/// The live processes to kill: descendants of `root`, and members of `session` if given.
/// `root` itself is never selected; zombies are skipped (they are only waiting to be reaped).
pub fn select_leftovers(procs: &[ProcInfo], root: i32, session: Option<i32>) -> Vec<i32> {
    let mut selected: Vec<i32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent && p.pid != root) {
            if !selected.contains(&p.pid) {
                selected.push(p.pid);
                frontier.push(p.pid);
            }
        }
    }
    if let Some(sid) = session {
        for p in procs.iter().filter(|p| p.sid == sid && p.pid != root) {
            if !selected.contains(&p.pid) {
                selected.push(p.pid);
            }
        }
    }
    selected.retain(|pid| procs.iter().any(|p| p.pid == *pid && !p.zombie));
    selected
}

/// Parse `/proc/PID/stat`: "pid (comm) state ppid pgrp session ..."; comm may hold ')'.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn parse_proc_stat(pid: i32, stat: &str) -> Option<ProcInfo> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_ascii_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let _pgrp = fields.next()?;
    let sid = fields.next()?.parse().ok()?;
    Some(ProcInfo {
        pid,
        ppid,
        sid,
        zombie: state == "Z" || state == "X",
    })
}
