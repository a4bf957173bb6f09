//! Classic BPF for seccomp, and the numbers of the system calls sbx-shell names: the one
//! emitter both of its filters are compiled by — the deny filter (`seccomp`) and the
//! questions to the guard (`mediated`). Pure; Linux only.
//!
//! A program (`Program`): the architecture check (another architecture's calls get
//! `other_arch`), the x32 check (on x86_64, x32 calls are its own numbers with bit 30 set,
//! which no comparison below would match: they get `x32`), one comparison per call that
//! jumps to its block, `default` for every other call; then the blocks. A block (`Block`)
//! holds tests, each all of its comparisons on the call's arguments: the first test that
//! holds returns `then`, none `otherwise`. Arguments are compared 32 bits at a time, the
//! low half unless a comparison says the high one (pids, modes, flags and ioctl requests
//! are ints: the kernel ignores the high half).

use std::collections::BTreeMap;

use crate::sys::at::{SYS_FCHMODAT2, SYS_REMOVEXATTRAT, SYS_SETXATTRAT};

pub type Instruction = libc::sock_filter;

/// The call runs.
pub const ALLOW: u32 = 0x7fff_0000;
/// The call waits for the listener's answer (SECCOMP_RET_USER_NOTIF).
pub const NOTIFY: u32 = 0x7fc0_0000;
/// The whole process is killed.
pub const KILL_PROCESS: u32 = 0x8000_0000;

/// The call returns `-errno` without running (0: returns 0).
pub const fn errno(errno: i32) -> u32 {
    0x0005_0000 | (errno as u32 & 0xffff)
}

/// One comparison of a 32-bit half of argument `arg`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cmp {
    pub arg: u8,
    pub high: bool,
    pub test: Test,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    Eq(u32),
    Ne(u32),
    /// The bits of `mask` are `value`'s.
    MaskedEq {
        mask: u32,
        value: u32,
    },
    /// Any of these bits is set.
    AnySet(u32),
}

impl Cmp {
    /// A comparison of argument `arg`'s low 32 bits.
    pub fn low(arg: u8, test: Test) -> Cmp {
        Cmp {
            arg,
            high: false,
            test,
        }
    }

    /// A comparison of argument `arg`'s high 32 bits.
    pub fn high(arg: u8, test: Test) -> Cmp {
        Cmp {
            arg,
            high: true,
            test,
        }
    }
}

/// What one call gets: `then` when any of `when` holds (each test is all of its
/// comparisons; an empty test always holds), `otherwise` else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub when: Vec<Vec<Cmp>>,
    pub then: u32,
    pub otherwise: u32,
}

impl Block {
    /// `then` for every call.
    pub fn always(then: u32, otherwise: u32) -> Block {
        Block {
            when: vec![Vec::new()],
            then,
            otherwise,
        }
    }
}

/// A whole filter; see the module's comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub other_arch: u32,
    pub x32: u32,
    pub default: u32,
    /// Each call by number. Blocks given for one number more than once are one block:
    /// their tests add up (their actions must agree; the first one's are kept).
    pub calls: Vec<(i64, Block)>,
}

/// A program the kernel would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BpfError {
    #[error("a test of system call {0} is too long for one jump")]
    TestTooLong(i64),
    #[error("the filter has {0} instructions, more than the kernel's 4096")]
    TooLong(usize),
    #[error("system call number {0} is out of range")]
    BadNumber(i64),
}

/// The kernel's most instructions per filter (BPF_MAXINSNS).
const MOST: usize = 4096;

const LD_W_ABS: u16 = 0x20;
const ALU_AND_K: u16 = 0x54;
const JA: u16 = 0x05;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
/// Where the call's number and architecture sit in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xC000_00B7;

/// Where argument `n`'s low (or high) 32 bits sit in `struct seccomp_data` (little-endian).
fn offset(n: u8, high: bool) -> u32 {
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

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Instruction {
    Instruction { code, jt, jf, k }
}

/// The program's instructions.
pub fn compile(program: &Program) -> Result<Vec<Instruction>, BpfError> {
    let mut calls: BTreeMap<u32, Block> = BTreeMap::new();
    let mut order = Vec::new();
    for (nr, block) in &program.calls {
        let key = u32::try_from(*nr).map_err(|_| BpfError::BadNumber(*nr))?;
        match calls.get_mut(&key) {
            Some(known) => known.when.extend(block.when.iter().cloned()),
            None => {
                calls.insert(key, block.clone());
                order.push(key);
            }
        }
    }
    let mut blocks = Vec::with_capacity(order.len());
    for key in &order {
        blocks.push(emit_block(&calls[key]).ok_or(BpfError::TestTooLong(i64::from(*key)))?);
    }
    let mut out = vec![
        stmt(LD_W_ABS, ARCH),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        stmt(RET_K, program.other_arch),
        stmt(LD_W_ABS, NR),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, program.x32),
    ];
    // Dispatch: each call's comparison, then a jump to its block (as long as need be).
    let dispatch = 2 * order.len() + 1;
    let mut before = 0; // the blocks' instructions before block i
    for (i, key) in order.iter().enumerate() {
        out.push(jump(JEQ_K, *key, 0, 1));
        let after_jump = dispatch - (2 * i + 2);
        let to = u32::try_from(after_jump + before).map_err(|_| BpfError::TooLong(MOST + 1))?;
        out.push(stmt(JA, to));
        before += blocks[i].len();
    }
    out.push(stmt(RET_K, program.default));
    out.extend(blocks.into_iter().flatten());
    if out.len() > MOST {
        return Err(BpfError::TooLong(out.len()));
    }
    Ok(out)
}

/// One call's block; `None` where a test is longer than a jump reaches.
fn emit_block(block: &Block) -> Option<Vec<Instruction>> {
    let mut out = Vec::new();
    for test in &block.when {
        let mut ins = Vec::new();
        // Where each failing jump sits, to be pointed at the next test.
        let mut fails = Vec::new();
        for cmp in test {
            ins.push(stmt(LD_W_ABS, offset(cmp.arg, cmp.high)));
            match cmp.test {
                Test::Eq(k) => {
                    fails.push((ins.len(), false));
                    ins.push(jump(JEQ_K, k, 0, 0));
                }
                Test::Ne(k) => {
                    fails.push((ins.len(), true));
                    ins.push(jump(JEQ_K, k, 0, 0));
                }
                Test::MaskedEq { mask, value } => {
                    ins.push(stmt(ALU_AND_K, mask));
                    fails.push((ins.len(), false));
                    ins.push(jump(JEQ_K, value, 0, 0));
                }
                Test::AnySet(bits) => {
                    fails.push((ins.len(), false));
                    ins.push(jump(JSET_K, bits, 0, 0));
                }
            }
        }
        ins.push(stmt(RET_K, block.then));
        let len = ins.len();
        for (at, on_true) in fails {
            let to_next = u8::try_from(len - at - 1).ok()?;
            match on_true {
                true => ins[at].jt = to_next,
                false => ins[at].jf = to_next,
            }
        }
        out.extend(ins);
    }
    out.push(stmt(RET_K, block.otherwise));
    Some(out)
}

/// The calls of `names` that exist on x86_64 alone: an architecture without one leaves it
/// out, where any other unknown name is an error.
pub const X86_64_ONLY: &[&str] = &[
    "chmod",
    "chown",
    "lchown",
    "utime",
    "utimes",
    "futimesat",
    "open",
    "creat",
    "mkdir",
    "mknod",
    "symlink",
    "link",
    "rename",
    "unlink",
    "rmdir",
];

/// The number of a system call either filter names, on this architecture; `None` for a
/// name this table does not know or this architecture lacks (`X86_64_ONLY`).
pub fn number(name: &str) -> Option<i64> {
    #[cfg(target_arch = "x86_64")]
    if let Some(nr) = x86_64_only(name) {
        return Some(nr);
    }
    let nr = match name {
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
        "openat" => libc::SYS_openat,
        "openat2" => libc::SYS_openat2,
        "mkdirat" => libc::SYS_mkdirat,
        "mknodat" => libc::SYS_mknodat,
        "symlinkat" => libc::SYS_symlinkat,
        "linkat" => libc::SYS_linkat,
        "renameat" => libc::SYS_renameat,
        "renameat2" => libc::SYS_renameat2,
        "unlinkat" => libc::SYS_unlinkat,
        "prctl" => libc::SYS_prctl,
        "umask" => libc::SYS_umask,
        "chdir" => libc::SYS_chdir,
        "fchdir" => libc::SYS_fchdir,
        "execve" => libc::SYS_execve,
        "execveat" => libc::SYS_execveat,
        "exit_group" => libc::SYS_exit_group,
        "connect" => libc::SYS_connect,
        "bind" => libc::SYS_bind,
        "socket" => libc::SYS_socket,
        "socketpair" => libc::SYS_socketpair,
        "ptrace" => libc::SYS_ptrace,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
        "pidfd_getfd" => libc::SYS_pidfd_getfd,
        "io_uring_setup" => libc::SYS_io_uring_setup,
        "io_uring_enter" => libc::SYS_io_uring_enter,
        "io_uring_register" => libc::SYS_io_uring_register,
        "kexec_load" => libc::SYS_kexec_load,
        "kexec_file_load" => libc::SYS_kexec_file_load,
        "bpf" => libc::SYS_bpf,
        "perf_event_open" => libc::SYS_perf_event_open,
        "keyctl" => libc::SYS_keyctl,
        "add_key" => libc::SYS_add_key,
        "request_key" => libc::SYS_request_key,
        "mount" => libc::SYS_mount,
        "umount2" => libc::SYS_umount2,
        "pivot_root" => libc::SYS_pivot_root,
        "move_mount" => libc::SYS_move_mount,
        "open_tree" => libc::SYS_open_tree,
        "fsopen" => libc::SYS_fsopen,
        "fsconfig" => libc::SYS_fsconfig,
        "fsmount" => libc::SYS_fsmount,
        "fspick" => libc::SYS_fspick,
        "mount_setattr" => libc::SYS_mount_setattr,
        _ => return None,
    };
    Some(nr)
}

#[cfg(target_arch = "x86_64")]
fn x86_64_only(name: &str) -> Option<i64> {
    let nr = match name {
        "chmod" => libc::SYS_chmod,
        "chown" => libc::SYS_chown,
        "lchown" => libc::SYS_lchown,
        "utime" => libc::SYS_utime,
        "utimes" => libc::SYS_utimes,
        "futimesat" => libc::SYS_futimesat,
        "open" => libc::SYS_open,
        "creat" => libc::SYS_creat,
        "mkdir" => libc::SYS_mkdir,
        "mknod" => libc::SYS_mknod,
        "symlink" => libc::SYS_symlink,
        "link" => libc::SYS_link,
        "rename" => libc::SYS_rename,
        "unlink" => libc::SYS_unlink,
        "rmdir" => libc::SYS_rmdir,
        _ => return None,
    };
    Some(nr)
}

/// Run `program` on one call as the kernel would (the instructions this module emits):
/// the action it returns. For the filters' tests.
#[cfg(test)]
pub fn run(program: &[Instruction], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_le_bytes());
    data[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    let (mut acc, mut pc) = (0u32, 0usize);
    loop {
        let ins = program[pc];
        pc += 1;
        let cond = |holds: bool| usize::from(if holds { ins.jt } else { ins.jf });
        match ins.code {
            LD_W_ABS => {
                let k = ins.k as usize;
                acc = u32::from_le_bytes([data[k], data[k + 1], data[k + 2], data[k + 3]]);
            }
            ALU_AND_K => acc &= ins.k,
            JA => pc += ins.k as usize,
            JEQ_K => pc += cond(acc == ins.k),
            JGE_K => pc += cond(acc >= ins.k),
            JSET_K => pc += cond(acc & ins.k != 0),
            RET_K => return ins.k,
            other => panic!("unexpected instruction {other:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn program(calls: Vec<(i64, Block)>) -> Vec<Instruction> {
        compile(&Program {
            other_arch: KILL_PROCESS,
            x32: errno(libc::EPERM),
            default: ALLOW,
            calls,
        })
        .unwrap()
    }

    #[test]
    fn each_test_returns_then_when_all_its_comparisons_hold() {
        let deny = errno(libc::EPERM);
        let p = program(vec![
            (1, Block::always(deny, ALLOW)),
            (
                2,
                Block {
                    when: vec![
                        vec![Cmp::low(0, Test::Eq(7)), Cmp::low(1, Test::Ne(0))],
                        vec![Cmp::high(2, Test::AnySet(0x10))],
                    ],
                    then: NOTIFY,
                    otherwise: ALLOW,
                },
            ),
            (
                3,
                Block {
                    when: vec![vec![Cmp::low(
                        1,
                        Test::MaskedEq {
                            mask: 0xf,
                            value: 2,
                        },
                    )]],
                    then: deny,
                    otherwise: ALLOW,
                },
            ),
        ]);
        let run = |nr, args| run(&p, AUDIT_ARCH, nr, args);
        assert_eq!(run(1, [0; 6]), deny);
        assert_eq!(run(2, [7, 1, 0, 0, 0, 0]), NOTIFY);
        assert_eq!(run(2, [7, 0, 0, 0, 0, 0]), ALLOW, "second comparison fails");
        assert_eq!(run(2, [8, 1, 0, 0, 0, 0]), ALLOW, "first comparison fails");
        assert_eq!(run(2, [0, 0, 0x10 << 32, 0, 0, 0]), NOTIFY, "second test");
        assert_eq!(run(2, [0, 0, 0x10, 0, 0, 0]), ALLOW, "the low half");
        assert_eq!(run(3, [0, 0x802, 0, 0, 0, 0]), deny);
        assert_eq!(run(3, [0, 0x801, 0, 0, 0, 0]), ALLOW);
        assert_eq!(run(4, [0; 6]), ALLOW, "a call the program does not name");
        assert_eq!(run(1 | X32_SYSCALL_BIT, [0; 6]), deny, "x32");
        assert_eq!(
            run_arch(&p, 0x4000_0003),
            KILL_PROCESS,
            "another architecture"
        );
    }

    fn run_arch(p: &[Instruction], arch: u32) -> u32 {
        run(p, arch, 1, [0; 6])
    }

    #[test]
    fn blocks_of_one_number_add_up_and_an_always_test_stays_always() {
        let deny = errno(libc::EPERM);
        let only_7 = Block {
            when: vec![vec![Cmp::low(0, Test::Eq(7))]],
            then: deny,
            otherwise: ALLOW,
        };
        let p = program(vec![(5, only_7.clone()), (5, Block::always(deny, ALLOW))]);
        assert_eq!(run(&p, AUDIT_ARCH, 5, [1, 0, 0, 0, 0, 0]), deny);
        let p = program(vec![(5, only_7.clone()), (6, only_7)]);
        assert_eq!(run(&p, AUDIT_ARCH, 6, [7, 0, 0, 0, 0, 0]), deny);
        assert_eq!(run(&p, AUDIT_ARCH, 6, [1, 0, 0, 0, 0, 0]), ALLOW);
    }

    #[test]
    fn a_program_longer_than_a_short_jump_reaches_every_block() {
        // 300 calls with a test each: the last blocks lie beyond 255 instructions.
        let calls: Vec<(i64, Block)> = (0..300)
            .map(|nr| {
                let when = vec![vec![Cmp::low(0, Test::Eq(nr as u32))]];
                (
                    nr,
                    Block {
                        when,
                        then: errno(nr as i32),
                        otherwise: ALLOW,
                    },
                )
            })
            .collect();
        let p = program(calls);
        assert!(p.len() > 600, "{}", p.len());
        for nr in [0u32, 150, 299] {
            let arg = u64::from(nr);
            assert_eq!(
                run(&p, AUDIT_ARCH, nr, [arg, 0, 0, 0, 0, 0]),
                errno(nr as i32)
            );
            assert_eq!(run(&p, AUDIT_ARCH, nr, [arg + 1, 0, 0, 0, 0, 0]), ALLOW);
        }
    }

    #[test]
    fn too_long_a_program_is_refused_not_cut() {
        let huge = Block {
            when: (0..5000).map(|v| vec![Cmp::low(0, Test::Eq(v))]).collect(),
            then: NOTIFY,
            otherwise: ALLOW,
        };
        let got = compile(&Program {
            other_arch: ALLOW,
            x32: ALLOW,
            default: ALLOW,
            calls: vec![(1, huge)],
        });
        assert!(matches!(got, Err(BpfError::TooLong(_))), "{got:?}");
    }

    #[test]
    fn every_name_has_its_number_and_x86_64_alone_has_the_old_calls() {
        assert_eq!(number("openat"), Some(libc::SYS_openat));
        assert_eq!(number("fchmodat2"), Some(452));
        assert_eq!(number("no_such_call"), None);
        for name in X86_64_ONLY {
            assert_eq!(
                number(name).is_some(),
                cfg!(target_arch = "x86_64"),
                "{name}"
            );
        }
    }
}
