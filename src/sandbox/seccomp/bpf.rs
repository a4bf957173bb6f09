//! The table compiled to classic BPF for this machine's architecture (`sandbox::bpf`):
//! a rule's match returns EPERM, every other call runs; another architecture's calls kill
//! the process, and x32's are refused when the filter says so. Linux only; pure.

use super::filter::{
    Condition, Filter, SeccompError, SOCK_STREAM, SOCK_TYPE_MASK, S_ISGID, S_ISUID,
};
use crate::sandbox::bpf::{self, Block, Cmp, Test, ALLOW, KILL_PROCESS};

/// Compile `filter` and throw the program away: whether the helper will be able to.
pub fn check(filter: &Filter) -> Result<(), SeccompError> {
    compile(filter).map(drop)
}

/// The classic-BPF program for `filter` on this machine's architecture. Pure.
pub fn compile(filter: &Filter) -> Result<Vec<bpf::Instruction>, SeccompError> {
    let deny = bpf::errno(libc::EPERM);
    let mut calls = Vec::new();
    for rule in &filter.rules {
        let block = Block {
            when: tests(&rule.condition),
            then: deny,
            otherwise: ALLOW,
        };
        for name in &rule.syscalls {
            match bpf::number(name) {
                Some(nr) => calls.push((nr, block.clone())),
                None if bpf::X86_64_ONLY.contains(&name.as_str()) => continue,
                None => return Err(SeccompError::UnknownSyscall(name.clone())),
            }
        }
    }
    let program = bpf::Program {
        other_arch: KILL_PROCESS,
        x32: if filter.reject_x32 { deny } else { ALLOW },
        default: ALLOW,
        calls,
    };
    bpf::compile(&program).map_err(|e| SeccompError::Compile(e.to_string()))
}

/// The tests under which one syscall is denied (any of them; each all of its comparisons).
fn tests(condition: &Condition) -> Vec<Vec<Cmp>> {
    let masked = |arg, mask, value| Cmp::low(arg, Test::MaskedEq { mask, value });
    let socket_type = |t| masked(1, SOCK_TYPE_MASK, t);
    match condition {
        Condition::Always => vec![Vec::new()],
        Condition::IoctlRequest { requests } => requests
            .iter()
            .map(|r| vec![Cmp::low(1, Test::Eq(*r))])
            .collect(),
        Condition::SocketNotIn {
            allowed,
            stream_only,
        } => {
            // Denied when the family is none of the allowed ones …
            let mut families: Vec<u32> = allowed.iter().map(|(f, _)| *f).collect();
            families.dedup();
            let mut tests = vec![families
                .iter()
                .map(|f| Cmp::low(0, Test::Ne(*f)))
                .collect::<Vec<_>>()];
            // … or when an allowed family is limited to one protocol and this is another.
            for (family, protocol) in allowed {
                if let Some(protocol) = protocol {
                    tests.push(vec![
                        Cmp::low(0, Test::Eq(*family)),
                        Cmp::low(2, Test::Ne(*protocol)),
                    ]);
                }
            }
            // … or when a stream-only family asks for any other type (every value of the
            // type bits but SOCK_STREAM's, so no type is left out).
            for family in stream_only {
                for other in (0..=SOCK_TYPE_MASK).filter(|t| *t != SOCK_STREAM) {
                    tests.push(vec![Cmp::low(0, Test::Eq(*family)), socket_type(other)]);
                }
            }
            tests
        }
        Condition::SetsSetId { arg, creating } => {
            let mut tests = Vec::new();
            for bit in [S_ISUID, S_ISGID] {
                match creating {
                    None => tests.push(vec![masked(*arg, bit, bit)]),
                    Some((flags_arg, flags)) => {
                        for flag in flags {
                            tests.push(vec![
                                masked(*flags_arg, *flag, *flag),
                                masked(*arg, bit, bit),
                            ]);
                        }
                    }
                }
            }
            tests
        }
        Condition::SocketIs { family, types } => match types {
            None => vec![vec![Cmp::low(0, Test::Eq(*family))]],
            Some(types) => types
                .iter()
                .map(|t| vec![Cmp::low(0, Test::Eq(*family)), socket_type(*t)])
                .collect(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;
    use crate::sandbox::bpf::{run, AUDIT_ARCH};
    use crate::sandbox::seccomp::build_filter;

    /// What `filter` does with one call.
    fn verdict(filter: &Filter, name: &str, args: [u64; 6]) -> u32 {
        let program = compile(filter).unwrap();
        let nr = bpf::number(name).unwrap();
        run(&program, AUDIT_ARCH, nr as u32, args)
    }

    #[test]
    fn the_compiled_filter_refuses_what_its_rules_say_and_runs_the_rest() {
        let deny = bpf::errno(libc::EPERM);
        let filter = build_filter(&policy_with("/home/u/p", "{}"), true, false);
        let call = |name, args| verdict(&filter, name, args);
        assert_eq!(call("ptrace", [0; 6]), deny);
        assert_eq!(call("io_uring_setup", [0; 6]), deny);
        assert_eq!(call("ioctl", [0, 0x5412, 0, 0, 0, 0]), deny, "TIOCSTI");
        assert_eq!(call("ioctl", [0, 0xffff_0000_0000_5412, 0, 0, 0, 0]), deny);
        assert_eq!(call("ioctl", [0, 0x5401, 0, 0, 0, 0]), ALLOW, "TCGETS");
        // Sockets alone with no network: unix streams, route netlink, TCP.
        let (unix, inet6, netlink) = (1, 10, 16);
        assert_eq!(call("socket", [unix, 1, 0, 0, 0, 0]), ALLOW);
        assert_eq!(
            call("socket", [unix, 2, 0, 0, 0, 0]),
            deny,
            "unix datagrams"
        );
        assert_eq!(call("socket", [inet6, 1 | 0o2000000, 0, 0, 0, 0]), ALLOW);
        assert_eq!(call("socket", [inet6, 2, 0, 0, 0, 0]), deny, "UDP");
        assert_eq!(call("socket", [netlink, 3, 0, 0, 0, 0]), ALLOW, "route");
        assert_eq!(call("socket", [netlink, 3, 9, 0, 0, 0]), deny, "audit");
        assert_eq!(call("socket", [40, 1, 0, 0, 0, 0]), deny, "vsock");
        // Set-id bits: in a mode, and in an open's mode only when it makes a file.
        assert_eq!(call("fchmod", [3, 0o4755, 0, 0, 0, 0]), deny);
        assert_eq!(call("fchmod", [3, 0o2755, 0, 0, 0, 0]), deny);
        assert_eq!(call("fchmod", [3, 0o755, 0, 0, 0, 0]), ALLOW);
        let creat = libc::O_CREAT as u64;
        assert_eq!(call("openat", [0, 0, creat | 1, 0o4755, 0, 0]), deny);
        assert_eq!(
            call("openat", [0, 0, 1, 0o4755, 0, 0]),
            ALLOW,
            "no mode read"
        );
        assert_eq!(call("openat", [0, 0, creat | 1, 0o644, 0, 0]), ALLOW);
        // A call no rule names; x32's numbers; another architecture's calls.
        let program = compile(&filter).unwrap();
        let getpid = libc::SYS_getpid as u32;
        assert_eq!(run(&program, AUDIT_ARCH, getpid, [0; 6]), ALLOW);
        let ptrace = bpf::number("ptrace").unwrap() as u32;
        assert_eq!(run(&program, AUDIT_ARCH, 39 | 0x4000_0000, [0; 6]), deny);
        assert_eq!(run(&program, 0x4000_0003, ptrace, [0; 6]), KILL_PROCESS);
    }

    #[test]
    fn with_the_full_network_sockets_are_as_bare_under_bwrap() {
        let filter = build_filter(
            &policy_with("/home/u/p", r#"{"network": "full"}"#),
            false,
            true,
        );
        assert_eq!(verdict(&filter, "socket", [10, 2, 0, 0, 0, 0]), ALLOW);
    }
}
