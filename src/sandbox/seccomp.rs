//! The seccomp layer (Linux): the syscall rules the helper installs just before exec, as a
//! table. Compiling it to BPF (seccompiler) and installing it is the helper's job.
//!
//! Every rule returns EPERM. The architecture check also rejects the x32 ABI (system call
//! numbers with bit 30 set on x86_64), which seccompiler does not do by itself, and ioctl
//! requests are compared on their low 32 bits (the kernel ignores the high ones).
//!
//! Sockets with network none: AF_UNIX, and AF_NETLINK with protocol NETLINK_ROUTE only.
//! Route netlink answers getifaddrs() and if_nameindex(), which glibc, Go and node use to
//! list interfaces (inside the bwrap layer only `lo` exists); it cannot move data off the
//! machine. Other netlink families (audit, netfilter, sock_diag, uevents) and every other
//! address family (AF_INET*, AF_PACKET, AF_VSOCK — which reached the hypervisor from this VM)
//! are denied.
//!
//! With a network allow-list, AF_INET and AF_INET6 are allowed too, as stream sockets only
//! (TCP, to reach the proxy's loopback port): no UDP, so no DNS of one's own. Where TCP may
//! go is the business of the network namespace (bwrap) or of Landlock's port rule.

use serde::{Deserialize, Serialize};

use crate::policy::{Network, Policy};

/// TIOCSTI: push a byte into a terminal's input. TIOCLINUX: console tricks, incl. pasting.
pub const TIOCSTI: u32 = 0x5412;
pub const TIOCLINUX: u32 = 0x541C;
pub const AF_UNIX: u32 = 1;
pub const AF_NETLINK: u32 = 16;
pub const NETLINK_ROUTE: u32 = 0;
pub const AF_INET: u32 = 2;
pub const AF_INET6: u32 = 10;
/// The socket type sits in the low 4 bits of socket()'s second argument (flags above).
#[cfg(target_os = "linux")]
const SOCK_TYPE_MASK: u32 = 0xf;
#[cfg(target_os = "linux")]
const SOCK_STREAM: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "when", deny_unknown_fields)]
pub enum Condition {
    /// Always denied.
    Always,
    /// Denied when the ioctl request (low 32 bits of argument 1) is one of these.
    IoctlRequest { requests: Vec<u32> },
    /// Denied unless (domain, protocol) is allowed; `protocol: None` allows any protocol.
    /// Families in `stream_only` are allowed as SOCK_STREAM sockets only.
    SocketNotIn {
        allowed: Vec<(u32, Option<u32>)>,
        #[serde(default)]
        stream_only: Vec<u32>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub syscalls: Vec<String>,
    pub condition: Condition,
    pub why: String,
}

/// The filter: every rule's match returns EPERM, everything else is allowed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    pub rules: Vec<Rule>,
    pub reject_x32: bool,
}

fn always(syscalls: &[&str], why: &str) -> Rule {
    Rule {
        syscalls: syscalls.iter().map(|s| s.to_string()).collect(),
        condition: Condition::Always,
        why: why.into(),
    }
}

pub fn build_filter(policy: &Policy) -> Filter {
    let mut rules = vec![
        Rule {
            syscalls: vec!["ioctl".into()],
            condition: Condition::IoctlRequest {
                requests: vec![TIOCSTI, TIOCLINUX],
            },
            why: "typing into a terminal's input, here or (legacy_tiocsti) in another one".into(),
        },
        always(
            &["ptrace", "process_vm_readv", "process_vm_writev"],
            "reading and writing other processes' memory",
        ),
        always(
            &["io_uring_setup", "io_uring_enter", "io_uring_register"],
            "io_uring does I/O that per-syscall filters never see",
        ),
        always(&["kexec_load", "kexec_file_load"], "replacing the kernel"),
        always(
            &["bpf", "perf_event_open"],
            "kernel programs and performance counters",
        ),
        always(
            &["keyctl", "add_key", "request_key"],
            "the kernel keyring, shared across the user's sessions",
        ),
        always(
            &[
                "mount",
                "umount2",
                "pivot_root",
                "move_mount",
                "open_tree",
                "fsopen",
                "fsconfig",
                "fsmount",
                "fspick",
                "mount_setattr",
            ],
            "changing what the filesystem looks like",
        ),
    ];
    let local = vec![(AF_UNIX, None), (AF_NETLINK, Some(NETLINK_ROUTE))];
    match policy.network {
        Network::Full => {}
        Network::None => rules.push(Rule {
            syscalls: vec!["socket".into(), "socketpair".into()],
            condition: Condition::SocketNotIn {
                allowed: local,
                stream_only: Vec::new(),
            },
            why: "network none: only local sockets".into(),
        }),
        Network::Allow(_) => rules.push(Rule {
            syscalls: vec!["socket".into(), "socketpair".into()],
            condition: Condition::SocketNotIn {
                allowed: [local, vec![(AF_INET, None), (AF_INET6, None)]].concat(),
                stream_only: vec![AF_INET, AF_INET6],
            },
            why: "network allow-list: local sockets, and TCP for the proxy".into(),
        }),
    }
    Filter {
        rules,
        reject_x32: true,
    }
}

/// A filter that cannot be compiled for this machine.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp: unknown system call {0:?} on this architecture")]
    UnknownSyscall(String),
    #[error("seccomp: {0}")]
    Compile(String),
}

/// The classic-BPF program for `filter` on this machine's architecture. Pure.
#[cfg(target_os = "linux")]
pub fn compile(filter: &Filter) -> Result<seccompiler::BpfProgram, SeccompError> {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    use std::collections::BTreeMap;

    let compile_err = |e: seccompiler::BackendError| SeccompError::Compile(e.to_string());
    let mut rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = BTreeMap::new();
    for rule in &filter.rules {
        let chain = conditions(&rule.condition).map_err(compile_err)?;
        for name in &rule.syscalls {
            let nr =
                syscall_number(name).ok_or_else(|| SeccompError::UnknownSyscall(name.clone()))?;
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
#[cfg(target_os = "linux")]
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
    }
}

#[cfg(target_os = "linux")]
const BPF_LD_W_ABS: u16 = 0x20;
#[cfg(target_os = "linux")]
const BPF_JGE_K: u16 = 0x35;
#[cfg(target_os = "linux")]
const BPF_RET_K: u16 = 0x06;
#[cfg(target_os = "linux")]
const SECCOMP_DATA_NR: u32 = 0;
#[cfg(target_os = "linux")]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

#[cfg(target_os = "linux")]
fn stmt(code: u16, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

#[cfg(target_os = "linux")]
fn jump(code: u16, k: u32, jt: u8, jf: u8) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The number of a system call named in the table, on this architecture.
#[cfg(target_os = "linux")]
fn syscall_number(name: &str) -> Option<i64> {
    let nr = match name {
        "ioctl" => libc::SYS_ioctl,
        "ptrace" => libc::SYS_ptrace,
        "process_vm_readv" => libc::SYS_process_vm_readv,
        "process_vm_writev" => libc::SYS_process_vm_writev,
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
        _ => return None,
    };
    Some(nr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;

    #[test]
    fn the_table_denies_what_the_issue_lists() {
        let filter = build_filter(&policy_with("/home/u/p", "{}"));
        let denied: Vec<&str> = filter
            .rules
            .iter()
            .flat_map(|r| r.syscalls.iter().map(String::as_str))
            .collect();
        for syscall in [
            "ioctl",
            "ptrace",
            "process_vm_readv",
            "process_vm_writev",
            "io_uring_setup",
            "kexec_load",
            "bpf",
            "perf_event_open",
            "keyctl",
            "add_key",
            "request_key",
            "mount",
            "socket",
        ] {
            assert!(denied.contains(&syscall), "{syscall}");
        }
        assert!(filter.reject_x32);
        assert_eq!(
            filter.rules[0].condition,
            Condition::IoctlRequest {
                requests: vec![0x5412, 0x541C]
            }
        );
    }

    /// The condition of the socket rule for a policy with `extra`, if there is one.
    fn socket_condition(extra: &str) -> Option<Condition> {
        build_filter(&policy_with("/home/u/p", extra))
            .rules
            .into_iter()
            .find(|r| r.syscalls.iter().any(|s| s == "socket"))
            .map(|r| r.condition)
    }

    #[test]
    fn sockets_are_only_limited_without_network() {
        assert_eq!(socket_condition(r#"{"network": "full"}"#), None);
        assert_eq!(
            socket_condition("{}"),
            Some(Condition::SocketNotIn {
                allowed: vec![(1, None), (16, Some(0))],
                stream_only: vec![],
            })
        );
        assert_eq!(
            socket_condition(r#"{"network": {"allow": ["api.example.com"]}}"#),
            Some(Condition::SocketNotIn {
                allowed: vec![(1, None), (16, Some(0)), (2, None), (10, None)],
                stream_only: vec![2, 10],
            })
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn every_table_compiles_and_x32_is_checked_after_the_architecture() {
        for extra in [
            r#"{}"#,
            r#"{"network": "full"}"#,
            r#"{"network": {"allow": ["api.example.com"]}}"#,
        ] {
            let program = compile(&build_filter(&policy_with("/home/u/p", extra))).unwrap();
            assert!(program.len() > 20);
            if cfg!(target_arch = "x86_64") {
                assert_eq!(program[0].k, 4, "arch is loaded first");
                assert_eq!((program[3].code, program[3].k), (0x20, 0));
                assert_eq!((program[4].code, program[4].k), (0x35, 0x4000_0000));
            }
        }
    }
}
