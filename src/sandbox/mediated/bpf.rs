//! The mediated table as a program of `sandbox::bpf` for this machine's architecture.
//! Pure.
//!
//! Another architecture's calls and x32's are allowed here (the deny filter kills or
//! refuses them), as is every call the table does not name; a call the table names gets
//! its condition (`When`) as a block that notifies the guard or lets it run.

use super::table::{creating, removing, table, Mediated, When};
use crate::sandbox::bpf::{self, Block, BpfError, Cmp, Instruction, Test, ALLOW, NOTIFY};

/// The call returns 0 without running.
const SUCCEED: u32 = bpf::errno(0);

/// One call's block: when it goes to the guard.
fn block(when: When) -> Block {
    let notify = |when: Vec<Vec<Cmp>>| Block {
        when,
        then: NOTIFY,
        otherwise: ALLOW,
    };
    let nonzero = |arg| Cmp::low(arg, Test::Ne(0));
    match when {
        When::Always => Block::always(NOTIFY, ALLOW),
        When::PidNotZero { arg } => notify(vec![vec![nonzero(arg)]]),
        // `which` is every process of a user, or `who` is not the caller.
        When::WhoNotSelf { user } => {
            notify(vec![vec![Cmp::low(0, Test::Eq(user))], vec![nonzero(1)]])
        }
        // Another pid, and a new limit given (a pointer: both halves).
        When::SetsLimitOfPid => notify(vec![
            vec![nonzero(0), nonzero(2)],
            vec![nonzero(0), Cmp::high(2, Test::Ne(0))],
        ]),
        When::IoctlRequest { request } => notify(vec![vec![Cmp::low(1, Test::Eq(request))]]),
        When::ArgIs { arg, value } => notify(vec![vec![Cmp::low(arg, Test::Eq(value))]]),
        When::FlagSet { arg, bits } => notify(vec![vec![Cmp::low(arg, Test::AnySet(bits))]]),
        When::FlagClear { arg, bits } => notify(vec![vec![Cmp::low(
            arg,
            Test::MaskedEq {
                mask: bits,
                value: 0,
            },
        )]]),
        When::Ignored { arg0, arg1 } => Block {
            when: vec![vec![
                Cmp::low(0, Test::Eq(arg0)),
                Cmp::low(1, Test::Eq(arg1)),
            ]],
            then: SUCCEED,
            otherwise: ALLOW,
        },
    }
}

/// The program for `table` on this architecture; calls it does not have are left out.
pub fn compile(table: &[Mediated]) -> Result<Vec<Instruction>, BpfError> {
    let calls = table
        .iter()
        .filter_map(|m| Some((bpf::number(m.syscall)?, block(m.when))))
        .collect();
    bpf::compile(&bpf::Program {
        other_arch: ALLOW,
        x32: ALLOW,
        default: ALLOW,
        calls,
    })
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
            .filter_map(|m| Some((bpf::number(m.syscall)?, m.syscall)))
            .collect()
    });
    names.iter().find(|(n, _)| *n == nr).map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::mediated::table::TIOCGPTPEER;
    use crate::sandbox::mediated::{creating, reading, table, IOPRIO_WHO_USER, PRIO_USER, READING};

    use crate::sandbox::bpf::{number, AUDIT_ARCH};

    /// Run `program` on one call, as the kernel would: the action it returns.
    fn run(program: &[Instruction], nr: i64, args: [u64; 6]) -> u32 {
        bpf::run(program, AUDIT_ARCH, nr as u32, args)
    }

    #[test]
    fn each_call_is_asked_exactly_when_its_condition_says() {
        let p = compile(&table()).unwrap();
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
        // Calls outside the table, and other architectures' or x32 numbers: allowed here.
        assert_eq!(run(&p, libc::SYS_openat, [0; 6]), ALLOW);
        assert_eq!(run(&p, nr("fchmod") | 0x4000_0000, [0; 6]), ALLOW);
        let fchmod = nr("fchmod") as u32;
        assert_eq!(bpf::run(&p, 0x4000_0003, fchmod, [0; 6]), ALLOW);
        for m in table().into_iter().chain(creating()) {
            if number(m.syscall).is_some() {
                assert_eq!(syscall_name(nr(m.syscall)), Some(m.syscall));
            }
        }
    }

    #[test]
    fn for_roots_reads_every_open_but_an_o_path_one_is_asked() {
        let mut table = creating();
        table.retain(|m| !READING.contains(&m.syscall));
        table.extend(reading());
        let p = compile(&table).unwrap();
        let nr = |name| number(name).unwrap();
        let ask = |name, args| run(&p, nr(name), args) == NOTIFY;
        assert_eq!(super::super::table::O_PATH, libc::O_PATH as u32);
        let path = libc::O_PATH as u64;
        for flags in [0, libc::O_DIRECTORY as u64, libc::O_CREAT as u64 | 1, 2] {
            assert!(ask("openat", [0, 0x1000, flags, 0, 0, 0]), "{flags:o}");
        }
        assert!(!ask("openat", [0, 0x1000, path, 0, 0, 0]));
        // With O_PATH every other flag is ignored by the kernel: nothing is made.
        let creat = libc::O_CREAT as u64 | 1;
        assert!(!ask("openat", [0, 0x1000, path | creat, 0, 0, 0]));
        assert!(ask("mkdirat", [0; 6]));
        #[cfg(target_arch = "x86_64")]
        {
            assert!(ask("open", [0x1000, 0, 0, 0, 0, 0]));
            assert!(!ask("open", [0x1000, path, 0, 0, 0, 0]));
        }
    }

    #[test]
    fn a_call_that_can_make_a_name_or_write_is_asked_and_a_reading_open_is_not() {
        let p = compile(&creating()).unwrap();
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
    }
}
