//! The table compiled to classic BPF for this machine's architecture (seccompiler), with the
//! x32 check seccompiler leaves out. Linux only; pure.

use super::filter::{
    Condition, Filter, SeccompError, SOCK_STREAM, SOCK_TYPE_MASK, S_ISGID, S_ISUID,
};

/// Calls of the table that exist on x86_64 alone: left out elsewhere.
const X86_64_ONLY: &[&str] = &["chmod", "creat", "open", "mknod"];

/// Compile `filter` and throw the program away: whether the helper will be able to.
pub fn check(filter: &Filter) -> Result<(), SeccompError> {
    compile(filter).map(drop)
}

/// The classic-BPF program for `filter` on this machine's architecture. Pure.
pub fn compile(filter: &Filter) -> Result<seccompiler::BpfProgram, SeccompError> {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    use std::collections::BTreeMap;

    let compile_err = |e: seccompiler::BackendError| SeccompError::Compile(e.to_string());
    let mut rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = BTreeMap::new();
    for rule in &filter.rules {
        let chain = conditions(&rule.condition).map_err(compile_err)?;
        for name in &rule.syscalls {
            let nr = match syscall_number(name) {
                Some(nr) => nr,
                None if X86_64_ONLY.contains(&name.as_str()) => continue,
                None => return Err(SeccompError::UnknownSyscall(name.clone())),
            };
            rules.entry(nr).or_default().extend(chain.iter().cloned());
        }
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(compile_err)?;
    let deny = SeccompAction::Errno(libc::EPERM as u32);
    let built =
        SeccompFilter::new(rules, SeccompAction::Allow, deny.clone(), arch).map_err(compile_err)?;
    let mut program: seccompiler::BpfProgram = built.try_into().map_err(compile_err)?;
    if filter.reject_x32 && cfg!(target_arch = "x86_64") {
        // After the architecture check (3 instructions): x32 calls are x86_64 calls with
        // bit 30 set in the number, which the per-syscall comparisons would never match.
        let x32_check = [
            stmt(BPF_LD_W_ABS, SECCOMP_DATA_NR),
            jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
            stmt(BPF_RET_K, u32::from(deny)),
        ];
        program.splice(3..3, x32_check);
    }
    Ok(program)
}

/// The rules under which one syscall is denied; empty means always.
fn conditions(
    condition: &Condition,
) -> Result<Vec<seccompiler::SeccompRule>, seccompiler::BackendError> {
    use seccompiler::{SeccompCmpArgLen::Dword, SeccompCmpOp, SeccompCondition, SeccompRule};
    let cmp = |arg, op, value: u32| SeccompCondition::new(arg, Dword, op, u64::from(value));
    match condition {
        Condition::Always => Ok(Vec::new()),
        Condition::IoctlRequest { requests } => requests
            .iter()
            .map(|r| SeccompRule::new(vec![cmp(1, SeccompCmpOp::Eq, *r)?]))
            .collect(),
        Condition::SocketNotIn {
            allowed,
            stream_only,
        } => {
            // Denied when the family is none of the allowed ones …
            let mut families: Vec<u32> = allowed.iter().map(|(f, _)| *f).collect();
            families.dedup();
            let mut rules = vec![SeccompRule::new(
                families
                    .iter()
                    .map(|f| cmp(0, SeccompCmpOp::Ne, *f))
                    .collect::<Result<_, _>>()?,
            )?];
            // … or when an allowed family is limited to one protocol and this is another.
            for (family, protocol) in allowed {
                if let Some(protocol) = protocol {
                    rules.push(SeccompRule::new(vec![
                        cmp(0, SeccompCmpOp::Eq, *family)?,
                        cmp(2, SeccompCmpOp::Ne, *protocol)?,
                    ])?);
                }
            }
            // … or when a stream-only family asks for any other type (every value of the
            // type bits but SOCK_STREAM's, so no type is left out).
            for family in stream_only {
                for other in (0..=SOCK_TYPE_MASK).filter(|t| *t != SOCK_STREAM) {
                    rules.push(SeccompRule::new(vec![
                        cmp(0, SeccompCmpOp::Eq, *family)?,
                        cmp(1, SeccompCmpOp::MaskedEq(u64::from(SOCK_TYPE_MASK)), other)?,
                    ])?);
                }
            }
            Ok(rules)
        }
        Condition::SetsSetId { arg, creating } => {
            let mut rules = Vec::new();
            for bit in [S_ISUID, S_ISGID] {
                let sets = || cmp(*arg, SeccompCmpOp::MaskedEq(u64::from(bit)), bit);
                match creating {
                    None => rules.push(SeccompRule::new(vec![sets()?])?),
                    Some((flags_arg, flags)) => {
                        for flag in flags {
                            let masked = SeccompCmpOp::MaskedEq(u64::from(*flag));
                            let made = cmp(*flags_arg, masked, *flag)?;
                            rules.push(SeccompRule::new(vec![made, sets()?])?);
                        }
                    }
                }
            }
            Ok(rules)
        }
        Condition::SocketIs { family, types } => match types {
            None => Ok(vec![SeccompRule::new(vec![cmp(
                0,
                SeccompCmpOp::Eq,
                *family,
            )?])?]),
            Some(types) => types
                .iter()
                .map(|t| {
                    SeccompRule::new(vec![
                        cmp(0, SeccompCmpOp::Eq, *family)?,
                        cmp(1, SeccompCmpOp::MaskedEq(u64::from(SOCK_TYPE_MASK)), *t)?,
                    ])
                })
                .collect(),
        },
    }
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_DATA_NR: u32 = 0;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The number of a system call named in the table, on this architecture.
fn syscall_number(name: &str) -> Option<i64> {
    let nr = match name {
        "ioctl" => libc::SYS_ioctl,
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
        "socket" => libc::SYS_socket,
        "socketpair" => libc::SYS_socketpair,
        #[cfg(target_arch = "x86_64")]
        "chmod" => libc::SYS_chmod,
        #[cfg(target_arch = "x86_64")]
        "creat" => libc::SYS_creat,
        #[cfg(target_arch = "x86_64")]
        "open" => libc::SYS_open,
        #[cfg(target_arch = "x86_64")]
        "mknod" => libc::SYS_mknod,
        "fchmod" => libc::SYS_fchmod,
        "fchmodat" => libc::SYS_fchmodat,
        "fchmodat2" => crate::sandbox::mediated::SYS_FCHMODAT2,
        "mknodat" => libc::SYS_mknodat,
        "openat" => libc::SYS_openat,
        _ => return None,
    };
    Some(nr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;
    use crate::sandbox::seccomp::build_filter;

    #[test]
    fn every_table_compiles_and_x32_is_checked_after_the_architecture() {
        for extra in [
            r#"{}"#,
            r#"{"network": "full"}"#,
            r#"{"network": {"allow": ["api.example.com"]}}"#,
        ] {
            let program = compile(&build_filter(&policy_with("/home/u/p", extra), false)).unwrap();
            assert!(program.len() > 20);
            if cfg!(target_arch = "x86_64") {
                assert_eq!(program[0].k, 4, "arch is loaded first");
                assert_eq!((program[3].code, program[3].k), (0x20, 0));
                assert_eq!((program[4].code, program[4].k), (0x35, 0x4000_0000));
            }
        }
    }
}
