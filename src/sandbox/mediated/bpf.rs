//! The mediated table compiled to classic BPF for this machine's architecture. Pure.
//!
//! Layout: the architecture check (another architecture's calls are the main filter's to
//! kill), the x32 check (likewise), one comparison per mediated call jumping to its block,
//! `allow`; then each call's block, ending in `allow` or `notify`. Arguments are compared on
//! their low 32 bits (pids and requests are ints; the kernel ignores the high ones), except
//! prlimit64's pointer, compared whole.

use super::table::{creating, removing, table, Mediated, When};

pub type Instruction = libc::sock_filter;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
const ALLOW: u32 = 0x7fff_0000;
const NOTIFY: u32 = 0x7fc0_0000;
/// SECCOMP_RET_ERRNO with errno 0: the call returns 0 without running.
const SUCCEED: u32 = 0x0005_0000;
const NR: u32 = 0;
const ARCH: u32 = 4;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Where argument `n`'s low (or high) 32 bits sit in `struct seccomp_data` (little-endian).
fn arg(n: u8, high: bool) -> u32 {
    16 + 8 * u32::from(n) + if high { 4 } else { 0 }
}

fn stmt(code: u16, k: u32) -> Instruction {
    Instruction {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> Instruction {
    Instruction {
        code: JEQ_K,
        jt,
        jf,
        k,
    }
}

/// One call's block: everything after its number matched.
fn block(when: When) -> Vec<Instruction> {
    let ret = |k| stmt(RET_K, k);
    match when {
        When::Always => vec![ret(NOTIFY)],
        When::PidNotZero { arg: n } => vec![
            stmt(LD_W_ABS, arg(n, false)),
            jeq(0, 0, 1),
            ret(ALLOW),
            ret(NOTIFY),
        ],
        When::WhoNotSelf { user } => vec![
            stmt(LD_W_ABS, arg(0, false)),
            jeq(user, 3, 0),
            stmt(LD_W_ABS, arg(1, false)),
            jeq(0, 0, 1),
            ret(ALLOW),
            ret(NOTIFY),
        ],
        When::SetsLimitOfPid => vec![
            stmt(LD_W_ABS, arg(0, false)),
            jeq(0, 4, 0),
            stmt(LD_W_ABS, arg(2, false)),
            jeq(0, 0, 3),
            stmt(LD_W_ABS, arg(2, true)),
            jeq(0, 0, 1),
            ret(ALLOW),
            ret(NOTIFY),
        ],
        When::IoctlRequest { request } => vec![
            stmt(LD_W_ABS, arg(1, false)),
            jeq(request, 1, 0),
            ret(ALLOW),
            ret(NOTIFY),
        ],
        When::Ignored { arg0, arg1 } => vec![
            stmt(LD_W_ABS, arg(0, false)),
            jeq(arg0, 0, 3),
            stmt(LD_W_ABS, arg(1, false)),
            jeq(arg1, 0, 1),
            ret(SUCCEED),
            ret(ALLOW),
        ],
        When::ArgIs { arg: n, value } => vec![
            stmt(LD_W_ABS, arg(n, false)),
            jeq(value, 1, 0),
            ret(ALLOW),
            ret(NOTIFY),
        ],
        When::FlagSet { arg: n, bits } => vec![
            stmt(LD_W_ABS, arg(n, false)),
            Instruction {
                code: JSET_K,
                jt: 1,
                jf: 0,
                k: bits,
            },
            ret(ALLOW),
            ret(NOTIFY),
        ],
    }
}

/// The program for `table` on this architecture; calls it does not have are left out.
pub fn compile(table: &[Mediated]) -> Vec<Instruction> {
    let calls: Vec<(u32, When)> = table
        .iter()
        .filter_map(|m| Some((u32::try_from(number(m.syscall)?).ok()?, m.when)))
        .collect();
    let blocks: Vec<Vec<Instruction>> = calls.iter().map(|(_, when)| block(*when)).collect();
    let mut program = vec![
        stmt(LD_W_ABS, ARCH),
        jeq(AUDIT_ARCH, 1, 0),
        stmt(RET_K, ALLOW),
        stmt(LD_W_ABS, NR),
        Instruction {
            code: JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        stmt(RET_K, ALLOW),
    ];
    // Dispatch: comparison i jumps over the comparisons after it, the final `allow`, and
    // the blocks before its own.
    let mut offset = calls.len(); // from the instruction after comparison 0 to block 0
    for (i, (nr, _)) in calls.iter().enumerate() {
        let to_block = offset - i; // comparisons left after this one, plus `allow`, plus blocks
        program.push(jeq(*nr, u8::try_from(to_block).unwrap_or(u8::MAX), 0));
        offset += blocks.get(i).map_or(0, Vec::len);
    }
    program.push(stmt(RET_K, ALLOW));
    program.extend(blocks.into_iter().flatten());
    program
}

/// The number of a call in the table, on this architecture; `None` where it has none.
pub fn number(name: &str) -> Option<i64> {
    let nr = match name {
        #[cfg(target_arch = "x86_64")]
        "chmod" => libc::SYS_chmod,
        #[cfg(target_arch = "x86_64")]
        "chown" => libc::SYS_chown,
        #[cfg(target_arch = "x86_64")]
        "lchown" => libc::SYS_lchown,
        #[cfg(target_arch = "x86_64")]
        "utime" => libc::SYS_utime,
        #[cfg(target_arch = "x86_64")]
        "utimes" => libc::SYS_utimes,
        #[cfg(target_arch = "x86_64")]
        "futimesat" => libc::SYS_futimesat,
        "fchmod" => libc::SYS_fchmod,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => SYS_FCHMODAT2,
        "fchown" => libc::SYS_fchown,
        "fchownat" => libc::SYS_fchownat,
        "utimensat" => libc::SYS_utimensat,
        "setxattr" => libc::SYS_setxattr,
        "lsetxattr" => libc::SYS_lsetxattr,
        "fsetxattr" => libc::SYS_fsetxattr,
        "setxattrat" => SYS_SETXATTRAT,
        "removexattr" => libc::SYS_removexattr,
        "lremovexattr" => libc::SYS_lremovexattr,
        "fremovexattr" => libc::SYS_fremovexattr,
        "removexattrat" => SYS_REMOVEXATTRAT,
        "setpriority" => libc::SYS_setpriority,
        "ioprio_set" => libc::SYS_ioprio_set,
        "prlimit64" => libc::SYS_prlimit64,
        "sched_setaffinity" => libc::SYS_sched_setaffinity,
        "sched_setscheduler" => libc::SYS_sched_setscheduler,
        "sched_setparam" => libc::SYS_sched_setparam,
        "sched_setattr" => libc::SYS_sched_setattr,
        "ioctl" => libc::SYS_ioctl,
        #[cfg(target_arch = "x86_64")]
        "open" => libc::SYS_open,
        #[cfg(target_arch = "x86_64")]
        "creat" => libc::SYS_creat,
        #[cfg(target_arch = "x86_64")]
        "mkdir" => libc::SYS_mkdir,
        #[cfg(target_arch = "x86_64")]
        "mknod" => libc::SYS_mknod,
        #[cfg(target_arch = "x86_64")]
        "symlink" => libc::SYS_symlink,
        #[cfg(target_arch = "x86_64")]
        "link" => libc::SYS_link,
        #[cfg(target_arch = "x86_64")]
        "rename" => libc::SYS_rename,
        "openat" => libc::SYS_openat,
        "openat2" => libc::SYS_openat2,
        "mkdirat" => libc::SYS_mkdirat,
        "mknodat" => libc::SYS_mknodat,
        "symlinkat" => libc::SYS_symlinkat,
        "linkat" => libc::SYS_linkat,
        "renameat" => libc::SYS_renameat,
        "renameat2" => libc::SYS_renameat2,
        "prctl" => libc::SYS_prctl,
        "umask" => libc::SYS_umask,
        "chdir" => libc::SYS_chdir,
        "fchdir" => libc::SYS_fchdir,
        "execve" => libc::SYS_execve,
        "execveat" => libc::SYS_execveat,
        "connect" => libc::SYS_connect,
        "bind" => libc::SYS_bind,
        #[cfg(target_arch = "x86_64")]
        "unlink" => libc::SYS_unlink,
        "unlinkat" => libc::SYS_unlinkat,
        #[cfg(target_arch = "x86_64")]
        "rmdir" => libc::SYS_rmdir,
        _ => return None,
    };
    Some(nr)
}

/// The name of a mediated call's number (what a notification carries; the table is
/// built once, as this is asked for every call).
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    static NAMES: std::sync::OnceLock<Vec<(i64, &'static str)>> = std::sync::OnceLock::new();
    let names = NAMES.get_or_init(|| {
        table()
            .into_iter()
            .chain(creating())
            .chain(removing())
            .filter_map(|m| Some((number(m.syscall)?, m.syscall)))
            .collect()
    });
    names.iter().find(|(n, _)| *n == nr).map(|(_, name)| *name)
}

/// Numbers of the generic syscall table (the same on x86_64 and aarch64) that the libc
/// crate does not name: fchmodat2 (Linux 6.6), setxattrat and removexattrat (6.13).
pub const SYS_FCHMODAT2: i64 = 452;
pub const SYS_SETXATTRAT: i64 = 463;
pub const SYS_REMOVEXATTRAT: i64 = 466;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::mediated::table::TIOCGPTPEER;
    use crate::sandbox::mediated::{creating, table, IOPRIO_WHO_USER, PRIO_USER};

    /// Run `program` on one call, as the kernel would: the action it returns.
    fn run(program: &[Instruction], nr: i64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as u32).to_le_bytes());
        data[4..8].copy_from_slice(&AUDIT_ARCH.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let (mut acc, mut pc) = (0u32, 0usize);
        loop {
            let ins = program[pc];
            pc += 1;
            match ins.code {
                LD_W_ABS => {
                    let k = ins.k as usize;
                    acc = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                }
                JEQ_K => pc += usize::from(if acc == ins.k { ins.jt } else { ins.jf }),
                JGE_K => pc += usize::from(if acc >= ins.k { ins.jt } else { ins.jf }),
                JSET_K => pc += usize::from(if acc & ins.k != 0 { ins.jt } else { ins.jf }),
                RET_K => return ins.k,
                other => panic!("unexpected instruction {other:#x}"),
            }
        }
    }

    #[test]
    fn each_call_is_asked_exactly_when_its_condition_says() {
        let p = compile(&table());
        let nr = |name| number(name).unwrap();
        let ask = |name, args| run(&p, nr(name), args) == NOTIFY;
        assert!(ask("fchmodat", [0; 6]));
        assert!(ask("fchown", [3, 0, 0, 0, 0, 0]));
        assert!(ask("removexattrat", [0; 6]));
        assert!(!ask("setpriority", [0, 0, 5, 0, 0, 0]), "itself");
        assert!(ask("setpriority", [0, 42, 5, 0, 0, 0]), "another pid");
        assert!(
            ask("setpriority", [u64::from(PRIO_USER), 0, 5, 0, 0, 0]),
            "a user"
        );
        assert!(!ask("ioprio_set", [1, 0, 0, 0, 0, 0]));
        assert!(ask(
            "ioprio_set",
            [u64::from(IOPRIO_WHO_USER), 0, 0, 0, 0, 0]
        ));
        assert!(
            !ask("prlimit64", [0, 7, 0x7fff_0000_1000, 0, 0, 0]),
            "itself"
        );
        assert!(!ask("prlimit64", [42, 7, 0, 0x1000, 0, 0]), "only reading");
        assert!(
            ask("prlimit64", [42, 7, 0x7fff_0000_0000, 0, 0, 0]),
            "high half"
        );
        assert!(ask("prlimit64", [42, 7, 0x1000, 0, 0, 0]));
        assert!(!ask("sched_setaffinity", [0, 8, 0x1000, 0, 0, 0]));
        assert!(ask("sched_setattr", [42, 0x1000, 0, 0, 0, 0]));
        assert!(ask("ioctl", [3, u64::from(TIOCGPTPEER), 2, 0, 0, 0]));
        assert!(!ask("ioctl", [3, 0x5401, 0, 0, 0, 0]), "TCGETS");
        assert!(
            ask("ioctl", [3, 0xffff_ffff_0000_5441, 0, 0, 0, 0]),
            "high bits ignored"
        );
        // unlinkat from the working directory (glibc's unlink on aarch64), not from a
        // directory's descriptor (`rm -r`).
        let cwd = libc::AT_FDCWD as u32 as u64;
        assert!(ask("unlinkat", [cwd, 0x1000, 0, 0, 0, 0]));
        assert!(ask(
            "unlinkat",
            [0xffff_ffff_0000_0000 | cwd, 0x1000, 0, 0, 0, 0]
        ));
        assert!(!ask("unlinkat", [5, 0x1000, 0, 0, 0, 0]));
        // Every jump fits its 8 bits: the whole program is shorter than 256.
        assert!(p.len() < 256, "{}", p.len());
        // Calls outside the table, and other architectures' or x32 numbers: allowed here.
        assert_eq!(run(&p, libc::SYS_openat, [0; 6]), ALLOW);
        assert_eq!(run(&p, nr("fchmod") | 0x4000_0000, [0; 6]), ALLOW);
        for m in table().into_iter().chain(creating()) {
            if number(m.syscall).is_some() {
                assert_eq!(syscall_name(nr(m.syscall)), Some(m.syscall));
            }
        }
    }

    #[test]
    fn a_call_that_can_make_a_name_or_write_is_asked_and_a_reading_open_is_not() {
        let p = compile(&creating());
        let nr = |name| number(name).unwrap();
        let ask = |name, args| run(&p, nr(name), args) == NOTIFY;
        let creat = libc::O_CREAT as u64;
        let rdwr = libc::O_RDWR as u64;
        assert!(ask("openat", [0, 0x1000, creat | rdwr, 0o644, 0, 0]));
        assert!(
            ask("openat", [0, 0x1000, rdwr | libc::O_APPEND as u64, 0, 0, 0]),
            "writes"
        );
        assert!(
            ask("openat", [0, 0x1000, libc::O_TRUNC as u64, 0, 0, 0]),
            "truncates"
        );
        assert!(!ask("openat", [0, 0x1000, 0, 0, 0, 0]), "reads");
        let reads =
            (libc::O_RDONLY | libc::O_CLOEXEC | libc::O_DIRECTORY | libc::O_NOFOLLOW) as u64;
        assert!(!ask("openat", [0, 0x1000, reads, 0, 0, 0]), "reads");
        assert!(ask(
            "openat",
            [0, 0x1000, 0xffff_ffff_0000_0000 | creat, 0, 0, 0]
        ));
        for name in [
            "umask",
            "chdir",
            "fchdir",
            "execve",
            "execveat",
            "openat2",
            "mkdirat",
            "mknodat",
            "symlinkat",
            "linkat",
            "renameat",
            "renameat2",
        ] {
            assert!(ask(name, [0; 6]), "{name}");
        }
        #[cfg(target_arch = "x86_64")]
        {
            assert!(ask("open", [0x1000, creat | 1, 0o644, 0, 0, 0]));
            assert!(!ask("open", [0x1000, 0, 0, 0, 0, 0]));
            assert!(ask("open", [0x1000, libc::O_WRONLY as u64, 0, 0, 0, 0]));
            for name in ["creat", "mkdir", "mknod", "symlink", "link", "rename"] {
                assert!(ask(name, [0; 6]), "{name}");
            }
        }
        assert_eq!(run(&p, nr("fchmod"), [0; 6]), ALLOW);
        // prctl(PR_SET_DUMPABLE, 0) succeeds without running; the rest of prctl runs.
        let dumpable = libc::PR_SET_DUMPABLE as u64;
        assert_eq!(run(&p, nr("prctl"), [dumpable, 0, 0, 0, 0, 0]), SUCCEED);
        assert_eq!(run(&p, nr("prctl"), [dumpable, 1, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            run(&p, nr("prctl"), [libc::PR_SET_NAME as u64, 0, 0, 0, 0, 0]),
            ALLOW
        );
        assert!(p.len() < 256, "{}", p.len());
    }
}
