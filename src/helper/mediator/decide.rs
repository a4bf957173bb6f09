//! The mediator's decisions that need no system call: what may change (`Scope`), what the
//! program's own rules let it reach (`Reach`), a name in `/dev/shm`, and who belongs to
//! the session. Pure.

use crate::protect::names::{under, PathSet};
use crate::sandbox::carve::{held, Carved};
use std::path::{Path, PathBuf};

/// The mediator's scope with Landlock alone: what may change, and the session's own places
/// (its `/dev/shm`, the name service socket).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// The writable trees (the Landlock ruleset's read-write rules).
    pub writable: Vec<PathBuf>,
    /// Protected paths: never changed, even inside a writable tree.
    pub protected: Vec<PathBuf>,
    /// The session's private directory standing for `/dev/shm` (`shm_name`).
    #[serde(default)]
    pub shm: Option<PathBuf>,
    /// The abstract unix socket where sbx-shell answers name service requests: a connect
    /// to the name service cache daemon's socket goes there
    /// (`netproxy::lookups::NAME_SERVICE_SOCKETS`).
    #[serde(default)]
    pub lookups: Option<String>,
    /// The session's own sockets (its ssh agent's), which the program may connect to.
    #[serde(default)]
    pub sockets: Vec<PathBuf>,
    /// The directories carved in the writable trees (`sandbox::carve`): writable as a tree
    /// is, but for what each leaves out.
    #[serde(default)]
    pub carved: Vec<Carved>,
    /// Their pools (`sandbox::carve::Pool`), which the guard makes names from.
    #[serde(default)]
    pub pools: Vec<crate::sandbox::carve::Pool>,
    /// The host's loopback services the allow-list names (`localhost:5432`), which the
    /// program's connects to loopback may reach.
    #[serde(default)]
    pub services: Vec<u16>,
}

impl Scope {
    /// The writable trees of a Landlock ruleset, and the policy's protected paths.
    pub fn from_ruleset(
        ruleset: &crate::sandbox::landlock::Ruleset,
        protected: Vec<PathBuf>,
        shm: Option<PathBuf>,
        lookups: Option<String>,
        sockets: Vec<PathBuf>,
    ) -> Scope {
        use crate::sandbox::landlock::Access;
        Scope {
            writable: ruleset
                .rules
                .iter()
                .filter(|r| r.access == Access::ReadWrite)
                .map(|r| r.path.clone())
                .collect(),
            protected,
            shm,
            lookups,
            sockets,
            carved: ruleset.carved.clone(),
            pools: ruleset.pools.clone(),
            services: Vec::new(),
        }
    }

    /// Whether the metadata of an object may change: `path` is how the kernel names an
    /// open descriptor of it (`/proc/self/fd/N`), `links` its link count.
    pub fn may_change(&self, path: &Path, links: u64) -> bool {
        use std::os::unix::ffi::OsStrExt;
        if !path.as_os_str().as_bytes().starts_with(b"/") || links == 0 {
            // pipe:[…], socket:[…], anon_inode:…, or unlinked (a memfd, O_TMPFILE, a file
            // removed since it was opened): in no tree.
            return true;
        }
        (self.writable.iter().any(|w| under(path, w)) || held(&self.carved, path))
            && !self.protected.iter().any(|p| under(path, p))
    }
}

/// The name a path gives in `/dev/shm`, where POSIX shared memory and semaphores live
/// (`shm_open`, `sem_open` and their unlink name `/dev/shm/NAME`): one component, neither
/// `.` nor `..`. Landlock alone, the guard makes, opens, links and removes such a name in
/// the session's private directory instead (`Scope::shm`), so the program has a
/// `/dev/shm` of its own while the host's segments stay out of its reach. Any other
/// spelling of the host's `/dev/shm` is the host's, which Landlock refuses.
pub fn shm_name(path: &[u8]) -> Option<&[u8]> {
    let name = path.strip_prefix(b"/dev/shm/")?;
    let plain = !name.is_empty() && !name.contains(&b'/') && name != b"." && name != b"..";
    plain.then_some(name)
}

/// Whether `pid` is a process of the session: `supervisor`'s descendant (and not
/// `supervisor` itself). `parent` gives a process's parent (`None`: gone).
pub fn in_session(pid: u32, supervisor: u32, parent: &dyn Fn(u32) -> Option<u32>) -> bool {
    let mut p = pid;
    for _ in 0..4096 {
        if p <= 1 {
            return false;
        }
        let Some(up) = parent(p) else { return false };
        if up == supervisor {
            return true;
        }
        p = up;
    }
    false
}

/// The program's TCP rules (its Landlock ruleset's network part), which the guard's thread
/// that connects a socket for the program takes on itself (`connecting`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetRules {
    /// TCP connect and bind handled: denied but to `connect_port`.
    pub deny_tcp: bool,
    pub connect_port: Option<u16>,
    /// A loopback port this connect, to loopback, may reach: where a server of the
    /// program's own listens (`loopback_bind`), or a host service the allow-list names
    /// (`Scope::services`).
    pub loopback_port: Option<u16>,
    /// The Landlock ABI the rules need.
    pub min_abi: u32,
    /// The network namespace is the session's own (a container's, with an allow-list or
    /// none): a connection is looked at as under bwrap (`connecting::observe`).
    pub own_network: bool,
}

/// What becomes of a TCP `bind` of the program's (Landlock alone, where TCP is the host's):
/// its servers listen on loopback only. `None`: refused (another address);
/// else the address to bind — the same, or, for the any-address (`0.0.0.0`, `::`), its
/// loopback (`127.0.0.1`, `::1`), so that a server meant for everyone serves this machine.
pub fn loopback_bind(addr: &[u8]) -> Option<Vec<u8>> {
    match ip_of(addr)? {
        (std::net::IpAddr::V4(ip), _) if ip.is_loopback() => Some(addr.to_vec()),
        (std::net::IpAddr::V6(ip), _) if ip.is_loopback() => Some(addr.to_vec()),
        (std::net::IpAddr::V4(ip), _) if ip.is_unspecified() => {
            let mut out = addr.to_vec();
            out[4..8].copy_from_slice(&[127, 0, 0, 1]);
            Some(out)
        }
        (std::net::IpAddr::V6(ip), _) if ip.is_unspecified() => {
            let mut out = addr.to_vec();
            out[8..24].copy_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
            Some(out)
        }
        _ => None,
    }
}

/// A `sockaddr_in` or `sockaddr_in6` as people write it (`10.0.0.5:8000`, `[fe80::1]:80`).
pub fn describe_addr(addr: &[u8]) -> Option<String> {
    let (ip, port) = ip_of(addr)?;
    Some(std::net::SocketAddr::new(ip, port).to_string())
}

/// A destination on another machine (`sockaddr_in`, `sockaddr_in6`, not loopback and not
/// the unspecified address), as people write it; `None` for any other address.
pub fn elsewhere(addr: &[u8]) -> Option<String> {
    let (ip, port) = ip_of(addr)?;
    let ip = ip.to_canonical();
    (!ip.is_loopback() && !ip.is_unspecified())
        .then(|| std::net::SocketAddr::new(ip, port).to_string())
}

/// The port of a loopback destination (`sockaddr_in`, `sockaddr_in6`), else `None`.
pub fn loopback_port(addr: &[u8]) -> Option<u16> {
    let (ip, port) = ip_of(addr)?;
    ip.is_loopback().then_some(port)
}

/// The address and port a `sockaddr_in` or `sockaddr_in6` holds (native-endian family,
/// network-order port and address, as the kernel reads them).
fn ip_of(addr: &[u8]) -> Option<(std::net::IpAddr, u16)> {
    let family = i32::from(u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]));
    let port = u16::from_be_bytes([*addr.get(2)?, *addr.get(3)?]);
    match family {
        libc::AF_INET => {
            let b: [u8; 4] = addr.get(4..8)?.try_into().ok()?;
            Some((std::net::Ipv4Addr::from(b).into(), port))
        }
        libc::AF_INET6 => {
            let b: [u8; 16] = addr.get(8..24)?.try_into().ok()?;
            Some((std::net::Ipv6Addr::from(b).into(), port))
        }
        _ => None,
    }
}

/// Where the program may make names and open files, as its Landlock ruleset says: what the
/// guard, which acts for the program without Landlock of its own, checks before it acts
/// (`create.rs`). `Reach::default()`: no Landlock, and the mount namespace the guard shares
/// with the program decides for both. The rules are indexed by the rights that matter to
/// the guard (`PathSet`): it asks for every name made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    rules: Option<ReachRules>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ReachRules {
    /// Where names may be made (read-write trees).
    make: PathSet,
    /// What may be opened for writing.
    write: PathSet,
    /// What may be opened for reading (not what may only be listed).
    read: PathSet,
    /// What may be listed: every rule lets the program list the directories it covers.
    list: PathSet,
    /// The carved directories (`sandbox::carve`): each as a read-write tree but for what
    /// it leaves out.
    carved: Vec<Carved>,
}

impl Reach {
    /// The reach the Landlock rules `rules` give (`None`: no Landlock). Landlock takes each
    /// rule's path as the object it opens (symlinks followed: a container's `/dev/ptmx` is
    /// `pts/ptmx`), while the guard asks by the paths the kernel gives: a rule that lets
    /// the program write stands for its real path too. (A rule that only lets it read
    /// matters to the guard beside a write it also judges.) `carved`: the ruleset's
    /// carved directories.
    pub fn new(rules: Option<&[crate::sandbox::landlock::PathRule]>, carved: &[Carved]) -> Reach {
        use crate::sandbox::landlock::Access;
        let Some(rules) = rules else {
            return Reach::default();
        };
        let writes = |a: Access| {
            matches!(
                a,
                Access::ReadWrite | Access::ReadWriteFiles | Access::Terminal
            )
        };
        let real: Vec<(PathBuf, Access)> = rules
            .iter()
            .filter(|r| writes(r.access))
            .filter_map(|r| Some((std::fs::canonicalize(&r.path).ok()?, r.access)))
            .collect();
        let all: Vec<(&Path, Access)> = rules
            .iter()
            .map(|r| (r.path.as_path(), r.access))
            .chain(real.iter().map(|(p, a)| (p.as_path(), *a)))
            .collect();
        let with = |ok: &dyn Fn(Access) -> bool| {
            PathSet::new(all.iter().filter(|(_, a)| ok(*a)).map(|(p, _)| *p))
        };
        Reach {
            rules: Some(ReachRules {
                make: with(&|a| a == Access::ReadWrite),
                write: with(&writes),
                read: with(&|a| a != Access::List),
                list: with(&|_| true),
                carved: carved.to_vec(),
            }),
        }
    }

    /// Whether Landlock bounds the program (else the mounts do, for the guard too).
    pub fn confined(&self) -> bool {
        self.rules.is_some()
    }

    /// Whether `path` is in `set`, or names no place in a tree at all (pipe:[…],
    /// socket:[…], anon_inode:… : in no tree, as for the kernel's check).
    fn granted(path: &Path, set: &PathSet, carved: &[Carved]) -> bool {
        use std::os::unix::ffi::OsStrExt;
        !path.as_os_str().as_bytes().starts_with(b"/") || set.holds(path) || held(carved, path)
    }

    /// Whether the program may make (or remove, rename away) a name in the directory `dir`.
    pub fn may_make_in(&self, dir: &Path) -> bool {
        self.rules
            .as_ref()
            .is_none_or(|r| Reach::granted(dir, &r.make, &r.carved))
    }

    /// Whether `path` is what a carved directory leaves out (`sandbox::carve`), and no
    /// rule of its own covers it.
    pub fn left_out(&self, path: &Path) -> bool {
        self.rules.as_ref().is_some_and(|r| {
            !r.make.holds(path)
                && r.carved
                    .iter()
                    .any(|c| under(path, &c.dir) && c.left_out.iter().any(|l| under(path, l)))
        })
    }

    /// Whether the program may open the object at `path` with open `flags`.
    pub fn may_open(&self, path: &Path, flags: i32) -> bool {
        self.may_open_as(path, flags, false)
    }

    /// The same for an object that is a directory (`dir`), which reading lists.
    pub fn may_open_as(&self, path: &Path, flags: i32, dir: bool) -> bool {
        let Some(r) = &self.rules else {
            return true;
        };
        let writing = super::opens::writes(flags);
        let reading = flags & libc::O_ACCMODE != libc::O_WRONLY;
        let granted = |set| Reach::granted(path, set, &r.carved);
        let read = if dir { &r.list } else { &r.read };
        (!writing || granted(&r.write)) && (!reading || granted(read))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_objects_in_writable_trees_outside_protected_paths_change() {
        let rules = Scope {
            writable: vec!["/srv/ws".into(), "/tmp/sbx-shell-0/session-9".into()],
            protected: vec!["/srv/ws/.git/hooks".into()],
            shm: None,
            lookups: None,
            sockets: Vec::new(),
            carved: Vec::new(),
            pools: Vec::new(),
            services: Vec::new(),
        };
        for yes in [
            "/srv/ws/a.sh",
            "/srv/ws",
            "/tmp/sbx-shell-0/session-9/x",
            "pipe:[1234]",
            "socket:[99]",
            "anon_inode:[eventfd]",
        ] {
            assert!(rules.may_change(Path::new(yes), 1), "{yes}");
        }
        assert!(rules.may_change(Path::new("/memfd:x (deleted)"), 0));
        // A name that only looks unlinked: judged by its path.
        assert!(!rules.may_change(Path::new("/etc/x (deleted)"), 1));
        for no in [
            "/home/u/.ssh",
            "/etc/passwd",
            "/srv/ws2/x",
            "/srv/ws/.git/hooks/pre-commit",
            "/tmp/x",
        ] {
            assert!(!rules.may_change(Path::new(no), 1), "{no}");
        }
    }

    #[test]
    fn only_plain_names_in_dev_shm_are_the_sessions_own() {
        assert_eq!(shm_name(b"/dev/shm/sem.mp-1x"), Some(&b"sem.mp-1x"[..]));
        assert_eq!(shm_name(b"/dev/shm/psm_0a1b"), Some(&b"psm_0a1b"[..]));
        for other in [
            &b"/dev/shm/"[..],
            b"/dev/shm",
            b"/dev/shm/.",
            b"/dev/shm/..",
            b"/dev/shm/a/b",
            b"/dev/shm//x",
            b"/dev//shm/x",
            b"/dev/shm/../shm/x",
            b"dev/shm/x",
            b"/tmp/x",
        ] {
            assert_eq!(shm_name(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn the_session_is_the_supervisors_descendants() {
        // 100 (sbx-shell) → 200 (guard) → 300 → 400; 500 is elsewhere.
        let parent = |p: u32| match p {
            200 => Some(100),
            300 => Some(200),
            400 => Some(300),
            500 => Some(1),
            100 => Some(50),
            _ => None,
        };
        assert!(in_session(400, 100, &parent));
        assert!(in_session(200, 100, &parent));
        assert!(!in_session(100, 100, &parent), "sbx-shell itself");
        assert!(!in_session(500, 100, &parent));
        assert!(!in_session(999, 100, &parent), "gone");
        assert!(!in_session(0, 100, &parent));
    }
}

#[cfg(test)]
mod bind_tests {
    use super::*;

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut a = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        a.extend(port.to_be_bytes());
        a.extend(ip);
        a.extend([0; 8]);
        a
    }

    fn v6(ip: std::net::Ipv6Addr, port: u16) -> Vec<u8> {
        let mut a = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        a.extend(port.to_be_bytes());
        a.extend([0; 4]);
        a.extend(ip.octets());
        a.extend([0; 4]);
        a
    }

    #[test]
    fn a_server_listens_on_loopback_only() {
        assert_eq!(
            loopback_bind(&v4([127, 0, 0, 1], 8000)),
            Some(v4([127, 0, 0, 1], 8000))
        );
        assert_eq!(
            loopback_bind(&v4([127, 1, 2, 3], 0)),
            Some(v4([127, 1, 2, 3], 0))
        );
        assert_eq!(
            loopback_bind(&v4([0, 0, 0, 0], 8000)),
            Some(v4([127, 0, 0, 1], 8000))
        );
        assert_eq!(loopback_bind(&v4([10, 0, 0, 5], 8000)), None);
        let (any, lo) = (
            std::net::Ipv6Addr::UNSPECIFIED,
            std::net::Ipv6Addr::LOCALHOST,
        );
        assert_eq!(loopback_bind(&v6(any, 5173)), Some(v6(lo, 5173)));
        assert_eq!(loopback_bind(&v6(lo, 5173)), Some(v6(lo, 5173)));
        assert_eq!(loopback_bind(&v6("fe80::1".parse().unwrap(), 1)), None);
        assert_eq!(loopback_bind(&[1, 0]), None);
        assert_eq!(loopback_port(&v4([127, 0, 0, 1], 8000)), Some(8000));
        assert_eq!(loopback_port(&v6(lo, 9)), Some(9));
        assert_eq!(loopback_port(&v4([93, 184, 216, 34], 443)), None);
        assert_eq!(
            describe_addr(&v4([10, 0, 0, 5], 8000)).as_deref(),
            Some("10.0.0.5:8000")
        );
    }
}

#[cfg(test)]
mod reach_tests {
    use super::*;
    use crate::sandbox::landlock::{Access, PathRule};

    #[test]
    fn the_guard_makes_and_opens_only_where_the_programs_rules_let_it() {
        let rule = |p: &str, access| PathRule {
            path: p.into(),
            access,
        };
        let reach = Reach::new(
            Some(&[
                rule("/", Access::Read),
                rule("/ws", Access::ReadWrite),
                rule("/dev/null", Access::ReadWriteFiles),
                rule("/dev/pts/3", Access::Terminal),
            ]),
            &[],
        );
        assert!(reach.may_make_in(Path::new("/ws/src")));
        assert!(!reach.may_make_in(Path::new("/etc")));
        assert!(!reach.may_make_in(Path::new("/wsx")));
        assert!(reach.may_open(Path::new("/dev/null"), libc::O_WRONLY | libc::O_TRUNC));
        assert!(reach.may_open(Path::new("/dev/pts/3"), libc::O_RDWR));
        assert!(!reach.may_open(Path::new("/etc/passwd"), libc::O_WRONLY));
        assert!(!reach.may_open(Path::new("/etc/passwd (deleted)"), libc::O_RDWR));
        assert!(reach.may_open(Path::new("/etc/passwd"), libc::O_RDONLY));
        assert!(reach.may_open(Path::new("pipe:[42]"), libc::O_WRONLY));
        let listed = Reach::new(Some(&[rule("/home/u", Access::List)]), &[]);
        // A rule's path through a symlink (a container's /dev/ptmx is pts/ptmx): Landlock
        // holds the object it opens, the guard asks by the real path.
        let dir = std::env::temp_dir().join(format!("sbx-reach-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("pts")).unwrap();
        std::fs::write(dir.join("pts/ptmx"), "").unwrap();
        std::os::unix::fs::symlink("pts/ptmx", dir.join("ptmx")).unwrap();
        let linked = Reach::new(
            Some(&[rule(dir.join("ptmx").to_str().unwrap(), Access::Terminal)]),
            &[],
        );
        let real = std::fs::canonicalize(dir.join("pts/ptmx")).unwrap();
        assert!(linked.may_open(&real, libc::O_RDWR));
        assert!(!linked.may_open(&real.with_file_name("0"), libc::O_RDWR));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!listed.may_open(Path::new("/home/u/x"), libc::O_RDONLY));
        assert!(listed.may_open_as(Path::new("/home/u/x"), libc::O_RDONLY, true));
        assert!(!listed.may_open_as(Path::new("/home/u/x"), libc::O_RDWR, true));
        // No Landlock: the mounts decide.
        assert!(Reach::default().may_make_in(Path::new("/etc")));
    }

    /// A carved home: a tree the guard makes names and opens in, but for what it leaves
    /// out — where a writable tree inside that keeps its own rule.
    #[test]
    fn a_carved_directory_reaches_as_a_tree_but_for_what_it_leaves_out() {
        let carved = [Carved {
            dir: "/h".into(),
            left_out: vec!["/h/.aws".into(), "/h/.local".into()],
        }];
        let private = PathRule {
            path: "/h/.local/state/home".into(),
            access: Access::ReadWrite,
        };
        let reach = Reach::new(Some(&[private]), &carved);
        for dir in ["/h", "/h/new", "/h/new/deep", "/h/.local/state/home/x"] {
            assert!(reach.may_make_in(Path::new(dir)), "{dir}");
        }
        for dir in ["/h/.aws", "/h/.local", "/h/.local/share", "/etc"] {
            assert!(!reach.may_make_in(Path::new(dir)), "{dir}");
        }
        assert!(reach.may_open(Path::new("/h/new/f"), libc::O_RDWR));
        assert!(!reach.may_open(Path::new("/h/.aws/credentials"), libc::O_RDWR));
        assert!(reach.left_out(Path::new("/h/.aws")) && reach.left_out(Path::new("/h/.aws/x")));
        assert!(!reach.left_out(Path::new("/h/x")));
        assert!(!reach.left_out(Path::new("/h/.local/state/home/x")));
        let scope = Scope {
            carved: carved.to_vec(),
            ..Scope::default()
        };
        assert!(scope.may_change(Path::new("/h/new"), 1));
        assert!(!scope.may_change(Path::new("/h/.aws/credentials"), 1));
    }
}
