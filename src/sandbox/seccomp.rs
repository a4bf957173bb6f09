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

use serde::Serialize;

use crate::policy::{Network, Policy};

/// TIOCSTI: push a byte into a terminal's input. TIOCLINUX: console tricks, incl. pasting.
pub const TIOCSTI: u32 = 0x5412;
pub const TIOCLINUX: u32 = 0x541C;
pub const AF_UNIX: u32 = 1;
pub const AF_NETLINK: u32 = 16;
pub const NETLINK_ROUTE: u32 = 0;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "when")]
pub enum Condition {
    /// Always denied.
    Always,
    /// Denied when the ioctl request (low 32 bits of argument 1) is one of these.
    IoctlRequest { requests: Vec<u32> },
    /// Denied unless (domain, protocol) is allowed; `protocol: None` allows any protocol.
    SocketNotIn { allowed: Vec<(u32, Option<u32>)> },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub syscalls: Vec<&'static str>,
    pub condition: Condition,
    pub why: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Filter {
    pub rules: Vec<Rule>,
    pub reject_x32: bool,
    pub errno: &'static str,
}

fn always(syscalls: &[&'static str], why: &'static str) -> Rule {
    Rule {
        syscalls: syscalls.to_vec(),
        condition: Condition::Always,
        why,
    }
}

pub fn build_filter(policy: &Policy) -> Filter {
    let mut rules = vec![
        Rule {
            syscalls: vec!["ioctl"],
            condition: Condition::IoctlRequest {
                requests: vec![TIOCSTI, TIOCLINUX],
            },
            why: "typing into a terminal's input, here or (legacy_tiocsti) in another one",
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
    if policy.network == Network::None {
        rules.push(Rule {
            syscalls: vec!["socket", "socketpair"],
            condition: Condition::SocketNotIn {
                allowed: vec![(AF_UNIX, None), (AF_NETLINK, Some(NETLINK_ROUTE))],
            },
            why: "network none: only local sockets",
        });
    }
    Filter {
        rules,
        reject_x32: true,
        errno: "EPERM",
    }
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
            .flat_map(|r| r.syscalls.clone())
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

    #[test]
    fn sockets_are_only_limited_without_network() {
        let full = build_filter(&policy_with("/home/u/p", r#"{"network": "full"}"#));
        assert!(!full.rules.iter().any(|r| r.syscalls.contains(&"socket")));
        let none = build_filter(&policy_with("/home/u/p", "{}"));
        let socket = none
            .rules
            .iter()
            .find(|r| r.syscalls.contains(&"socket"))
            .unwrap();
        assert_eq!(
            socket.condition,
            Condition::SocketNotIn {
                allowed: vec![(1, None), (16, Some(0))]
            }
        );
    }
}
