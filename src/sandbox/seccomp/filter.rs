//! The deny filter as data: the rules (`Rule`, each a syscall and the condition on its
//! arguments that refuses it), built from the policy (`build_filter`). Pure; `bpf.rs`
//! compiles it.

use crate::policy::{Network, Policy};
use serde::{Deserialize, Serialize};

/// TIOCSTI: push a byte into a terminal's input. TIOCLINUX: console tricks, incl. pasting.
pub const TIOCSTI: u32 = 0x5412;

pub const TIOCLINUX: u32 = 0x541C;

pub const AF_UNIX: u32 = 1;

pub const AF_NETLINK: u32 = 16;

pub const NETLINK_ROUTE: u32 = 0;

pub const AF_INET: u32 = 2;

pub const AF_INET6: u32 = 10;

/// The socket type sits in the low 4 bits of socket()'s second argument (flags above).
pub const SOCK_TYPE_MASK: u32 = 0xf;

pub const SOCK_STREAM: u32 = 1;

pub const SOCK_DGRAM: u32 = 2;

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
    /// Denied when the domain (argument 0) is `family` and, if `types` are given, the type
    /// (argument 1's low 4 bits) is one of them.
    SocketIs {
        family: u32,
        #[serde(default)]
        types: Option<Vec<u32>>,
    },
    /// Denied when argument `arg`, a file mode, sets S_ISUID or S_ISGID; with `creating`
    /// (argument, flags), only when one of those flags is set in it too (open's O_CREAT,
    /// O_TMPFILE: its mode is read only then).
    SetsSetId {
        arg: u8,
        #[serde(default)]
        creating: Option<(u8, Vec<u32>)>,
    },
}

pub const S_ISUID: u32 = 0o4000;
pub const S_ISGID: u32 = 0o2000;
/// open's flags that make a file with the mode given (`__O_TMPFILE` alone: `O_TMPFILE`
/// adds `O_DIRECTORY`, which an ordinary open of a directory sets too).
pub const O_CREAT: u32 = 0o100;
pub const O_TMPFILE_ONLY: u32 = 0o20000000;

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

/// The table for `policy`; `alone`: Landlock alone, without bwrap's namespaces and mounts;
/// `own_network`: the network namespace is the session's own (bwrap's, a container's:
/// `Backend::network_of_its_own`).
///
/// Alone, pathname unix sockets are not mediated by Landlock before ABI 9 and no mount
/// hides the host's (tmux, screen, D-Bus, ssh-agent, gpg-agent, container engines, X):
/// stream and seqpacket sockets are made, and their `connect` goes to sbx-shell's guard
/// (`mediated`), which connects only to a socket that lies where the program may make
/// names (its own: tmux's, a language server's, a test server's); `bind` makes a name,
/// which Landlock judges. Datagram sockets and pairs are refused: `sendto` could name a
/// host socket with every datagram.
pub fn build_filter(policy: &Policy, alone: bool, own_network: bool) -> Filter {
    let mut rules = always_denied();
    rules.extend(setid_rules());
    rules.extend(socket_rules(&policy.network, alone, own_network));
    Filter {
        rules,
        reject_x32: true,
    }
}

/// What no policy allows: typing into a terminal, other processes' memory and
/// descriptors, io_uring, the kernel's programs and keyring, mounts.
fn always_denied() -> Vec<Rule> {
    vec![
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
            &["pidfd_getfd"],
            "taking another process's descriptors (the guard's listener)",
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
    ]
}

/// No file the program makes or changes runs as its owner or group (set-user-ID or
/// set-group-ID): root's program would otherwise leave a program that runs as host root
/// for anyone, and any program one that runs as its user. `chmod`, `creat`, `open` and
/// `mknod` exist on x86_64 only.
fn setid_rules() -> Vec<Rule> {
    let creating = vec![O_CREAT, O_TMPFILE_ONLY];
    let rule = |syscalls: &[&str], arg, creating: Option<(u8, Vec<u32>)>| Rule {
        syscalls: syscalls.iter().map(|s| s.to_string()).collect(),
        condition: Condition::SetsSetId { arg, creating },
        why: "set-user-ID and set-group-ID files".into(),
    };
    vec![
        rule(&["chmod", "fchmod", "creat", "mknod"], 1, None),
        rule(&["fchmodat", "fchmodat2", "mknodat"], 2, None),
        rule(&["open"], 2, Some((1, creating.clone()))),
        rule(&["openat"], 3, Some((2, creating))),
    ]
}

/// Which sockets the program may make, by the network policy; `alone`: Landlock alone
/// (no mount namespace: the host's unix sockets are there by path); `own_network`: a
/// network namespace of the session's own.
fn socket_rules(network: &Network, alone: bool, own_network: bool) -> Vec<Rule> {
    let mut rules = Vec::new();
    let local = vec![(AF_UNIX, None), (AF_NETLINK, Some(NETLINK_ROUTE))];
    let created: Vec<String> = vec!["socket".into(), "socketpair".into()];
    if alone {
        rules.push(Rule {
            syscalls: created.clone(),
            condition: Condition::SocketIs {
                family: AF_UNIX,
                types: Some(vec![SOCK_DGRAM]),
            },
            why: "Landlock alone: unix datagram sockets (sendto could name a host socket)".into(),
        });
    }
    match network {
        Network::Full => {}
        _ if own_network => rules.push(Rule {
            syscalls: created,
            condition: Condition::SocketNotIn {
                allowed: [local, vec![(AF_INET, None), (AF_INET6, None)]].concat(),
                stream_only: Vec::new(),
            },
            why: "no network of its own: local sockets, and the namespace's own loopback".into(),
        }),
        // TCP on the host's loopback: the program's own servers there (bound on loopback
        // by the guard), and the proxy's port; Landlock refuses every other connect.
        Network::None => rules.push(Rule {
            syscalls: created,
            condition: Condition::SocketNotIn {
                allowed: [local, vec![(AF_INET, None), (AF_INET6, None)]].concat(),
                stream_only: vec![AF_INET, AF_INET6],
            },
            why: "network none: local sockets, and TCP for the program's own servers on loopback"
                .into(),
        }),
        Network::Allow(_) => rules.push(Rule {
            syscalls: created,
            condition: Condition::SocketNotIn {
                allowed: [local, vec![(AF_INET, None), (AF_INET6, None)]].concat(),
                stream_only: vec![AF_INET, AF_INET6],
            },
            why: "network allow-list: local sockets, and TCP for the proxy".into(),
        }),
    }
    rules
}

/// A filter that cannot be compiled for this machine.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp: unknown system call {0:?} on this architecture")]
    UnknownSyscall(String),
    #[error("seccomp: {0}")]
    Compile(String),
    #[error("seccomp exists on Linux only")]
    #[cfg_attr(target_os = "linux", allow(dead_code))]
    Unsupported,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;
    use crate::sandbox::seccomp::check;

    #[test]
    fn the_table_denies_what_the_issue_lists() {
        let filter = build_filter(&policy_with("/home/u/p", "{}"), false, true);
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
            "pidfd_getfd",
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
        build_filter(&policy_with("/home/u/p", extra), false, true)
            .rules
            .into_iter()
            .find(|r| r.syscalls.iter().any(|s| s == "socket"))
            .map(|r| r.condition)
    }

    /// Under bwrap: with no network or an allow-list, inet sockets reach only the
    /// namespace's own loopback (the proxy and the name server are there).
    #[test]
    fn sockets_are_only_limited_without_network() {
        let namespace = Some(Condition::SocketNotIn {
            allowed: vec![(1, None), (16, Some(0)), (2, None), (10, None)],
            stream_only: vec![],
        });
        assert_eq!(socket_condition(r#"{"network": "full"}"#), None);
        assert_eq!(socket_condition("{}"), namespace);
        assert_eq!(
            socket_condition(r#"{"network": {"allow": ["api.example.com"]}}"#),
            namespace
        );
    }

    #[test]
    fn alone_unix_stream_sockets_are_made_and_datagram_ones_refused() {
        let dgram = Condition::SocketIs {
            family: AF_UNIX,
            types: Some(vec![SOCK_DGRAM]),
        };
        for (network, socket) in [
            (r#"{"network": "full"}"#, vec![dgram.clone()]),
            (
                r#"{"network": {"allow": ["api.example.com"]}}"#,
                vec![
                    dgram.clone(),
                    Condition::SocketNotIn {
                        allowed: vec![(1, None), (16, Some(0)), (2, None), (10, None)],
                        stream_only: vec![2, 10],
                    },
                ],
            ),
            // No network: TCP all the same, for the program's own servers on loopback.
            (
                "{}",
                vec![
                    dgram.clone(),
                    Condition::SocketNotIn {
                        allowed: vec![(1, None), (16, Some(0)), (2, None), (10, None)],
                        stream_only: vec![2, 10],
                    },
                ],
            ),
        ] {
            let filter = build_filter(&policy_with("/home/u/p", network), true, false);
            let of = |name: &str| {
                filter
                    .rules
                    .iter()
                    .filter(|r| r.syscalls.iter().any(|s| s == name))
                    .map(|r| r.condition.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(of("socket"), socket, "{network}");
            assert_eq!(of("socketpair"), socket, "{network}");
            check(&filter).unwrap();
        }
    }

    #[test]
    fn in_a_container_unix_datagrams_are_refused_and_its_own_network_is_the_programs() {
        // Alone (the host's unix sockets by path) in a network namespace of the session's
        // own: any IP socket, as under bwrap, for its loopback.
        let filter = build_filter(&policy_with("/home/u/p", "{}"), true, true);
        let socket: Vec<Condition> = filter
            .rules
            .iter()
            .filter(|r| r.syscalls.iter().any(|s| s == "socket"))
            .map(|r| r.condition.clone())
            .collect();
        assert_eq!(
            socket,
            vec![
                Condition::SocketIs {
                    family: 1,
                    types: Some(vec![2]),
                },
                Condition::SocketNotIn {
                    allowed: vec![(1, None), (16, Some(0)), (2, None), (10, None)],
                    stream_only: Vec::new(),
                },
            ]
        );
    }
}
