//! The host's unix sockets: where they are (`HostSockets::measure`), which of them a sandbox hides
//! (`hidden`, pure), and which inherited variables point at them (`variable_target`, pure).
//!
//! A read-only bind does not stop `connect()` on a pathname unix socket, and whatever
//! answers there (a terminal multiplexer, the session bus, an ssh or gpg agent, a container
//! engine, systemd) acts on the host. So every socket the sandbox could reach is hidden
//! unless a policy grants it by path (`filesystem.sockets`, `--allow-socket`). They are
//! found, not listed:
//!
//! - from the kernel: every pathname socket bound in sbx-shell's network namespace
//!   (`/proc/net/unix`), wherever it is;
//! - from the runtime directories: `/run` (and `/var/run` when it is not a link to it)
//!   walked for socket files (five levels down, by directory entry types, `/run/user`
//!   left out), which also finds the sockets of other network namespaces that live there;
//!   every directory in `/run/user` and `$XDG_RUNTIME_DIR` are hidden whole, whether the
//!   variable is set or not.
//!
//! Not found: a socket bound after the session started, and one bound in another network
//! namespace outside `/run` (docs/config.md says so).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The parent of the per-user runtime directories.
pub const RUNTIME_PARENT: &str = "/run/user";
/// Where the walk looks for socket files.
const WALKED: &[&str] = &["/run", "/var/run"];
/// The walk's bounds: a pathological `/run` costs at most this many entries and levels.
const WALK_ENTRIES: usize = 50_000;
const WALK_DEPTH: usize = 5;

/// The host's sockets and runtime directories, real paths, each once, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSockets {
    /// Every directory in `/run/user`, and `$XDG_RUNTIME_DIR` wherever it is.
    pub runtime_dirs: Vec<PathBuf>,
    /// Socket files: the kernel's pathname sockets that are socket files here, and those
    /// the walk of `/run` found.
    pub sockets: Vec<PathBuf>,
}

impl HostSockets {
    /// Measured now: the kernel's list, the walk, the runtime directories.
    pub fn measure(xdg_runtime_dir: Option<&Path>) -> HostSockets {
        let mut runtime_dirs: Vec<PathBuf> = std::fs::read_dir(RUNTIME_PARENT)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect();
        runtime_dirs.extend(xdg_runtime_dir.and_then(|d| std::fs::canonicalize(d).ok()));
        let mut sockets: Vec<PathBuf> = std::fs::read_to_string("/proc/net/unix")
            .map(|text| parse_kernel_list(&text))
            .unwrap_or_default()
            .into_iter()
            // Every accepted connection repeats its listener's path: each looked at once.
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter_map(|p| std::fs::canonicalize(&p).ok())
            .filter(|p| is_socket(p))
            .collect();
        let mut budget = WALK_ENTRIES;
        let mut walked: Vec<PathBuf> = Vec::new();
        for dir in WALKED {
            let Ok(real) = std::fs::canonicalize(dir) else {
                continue;
            };
            if !walked.contains(&real) {
                // By the directory entries' types: no stat per entry.
                crate::sys::files::walk_bounded(&real, WALK_DEPTH, &mut budget, &mut |entry| {
                    use std::os::unix::fs::FileTypeExt;
                    let Ok(kind) = entry.file_type() else {
                        return false;
                    };
                    if kind.is_socket() {
                        sockets.push(entry.path());
                    }
                    // /run/user is hidden whole (`hidden`); what a grant opens there, the
                    // kernel's list has.
                    kind.is_dir() && entry.path() != Path::new(RUNTIME_PARENT)
                });
                walked.push(real);
            }
        }
        for list in [&mut runtime_dirs, &mut sockets] {
            list.sort();
            list.dedup();
        }
        HostSockets {
            runtime_dirs,
            sockets,
        }
    }
}

/// Whether `path` (followed) is a socket file.
pub fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

/// The absolute paths of the pathname sockets in `/proc/net/unix`'s text: the eighth
/// field on, when it begins with `/` (abstract ones begin with `@`, unbound ones have none).
pub fn parse_kernel_list(text: &str) -> Vec<PathBuf> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let end = rest.find(char::is_whitespace)?;
                rest = rest[end..].trim_start();
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect()
}

/// The type (`SOCK_STREAM`, `SOCK_DGRAM`, `SOCK_SEQPACKET`) of the unix socket with inode
/// `inode` in `/proc/net/unix`'s text (its fifth field; the seventh is the inode), or `None`
/// when no unix socket has it: a socket of another family.
pub fn unix_socket_type(text: &str, inode: u64) -> Option<i32> {
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ino: u64 = fields.get(6)?.parse().ok()?;
        (ino == inode)
            .then(|| i32::from_str_radix(fields.get(4)?, 16).ok())
            .flatten()
    })
}

/// What socket a protocol name stands for (a socket's `system.sockprotoname`, the name
/// of the protocol it was made with): its family, type and protocol, for the protocols a
/// socket can be made again from that alone. `None` for the rest (a raw socket's protocol,
/// SCTP's type, a unix socket's type are not in the name).
#[cfg(target_os = "linux")]
pub fn inet_socket_kind(protocol_name: &[u8]) -> Option<(i32, i32, i32)> {
    use libc::{AF_INET, AF_INET6, SOCK_DGRAM, SOCK_STREAM};
    Some(match protocol_name {
        b"TCP" => (AF_INET, SOCK_STREAM, 0),
        b"TCPv6" => (AF_INET6, SOCK_STREAM, 0),
        b"UDP" => (AF_INET, SOCK_DGRAM, 0),
        b"UDPv6" => (AF_INET6, SOCK_DGRAM, 0),
        b"UDP-Lite" => (AF_INET, SOCK_DGRAM, libc::IPPROTO_UDPLITE),
        b"UDPLITEv6" => (AF_INET6, SOCK_DGRAM, libc::IPPROTO_UDPLITE),
        b"PING" => (AF_INET, SOCK_DGRAM, libc::IPPROTO_ICMP),
        b"PINGv6" => (AF_INET6, SOCK_DGRAM, libc::IPPROTO_ICMPV6),
        b"MPTCP" => (AF_INET, SOCK_STREAM, libc::IPPROTO_MPTCP),
        b"MPTCPv6" => (AF_INET6, SOCK_STREAM, libc::IPPROTO_MPTCP),
        _ => return None,
    })
}

/// What a sandbox hides of `found`, and what it grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Hidden {
    /// Runtime directories hidden whole (an empty read-only directory in their place).
    pub dirs: Vec<PathBuf>,
    /// Sockets hidden one by one: not in a hidden directory, not granted.
    pub sockets: Vec<PathBuf>,
    /// Sockets that stay reachable: a grant names them or a directory above them.
    pub granted: Vec<PathBuf>,
}

/// Pure: `found` minus `grants` (socket grants, real paths). A runtime directory holding a
/// grant, or a path the policy makes readable or writable (`reachable`), is not hidden
/// whole: its sockets are, one by one.
pub fn hidden(found: &HostSockets, grants: &[&Path], reachable: &[&Path]) -> Hidden {
    let granted = |p: &Path| grants.iter().any(|g| p.starts_with(g));
    let dirs: Vec<PathBuf> = found
        .runtime_dirs
        .iter()
        .filter(|d| {
            !grants.iter().any(|g| g.starts_with(d) || d.starts_with(g))
                && !reachable.iter().any(|r| r.starts_with(d))
        })
        .cloned()
        .collect();
    let (granted, sockets): (Vec<PathBuf>, Vec<PathBuf>) = found
        .sockets
        .iter()
        .filter(|s| !dirs.iter().any(|d| s.starts_with(d)))
        .cloned()
        .partition(|s| granted(s));
    Hidden {
        dirs,
        sockets,
        granted,
    }
}

/// `hidden` for a policy: its socket grants, and the paths it makes readable or writable.
pub fn for_policy(found: &HostSockets, fs: &crate::policy::Filesystem) -> Hidden {
    let grants: Vec<&Path> = fs.sockets.iter().map(|p| p.real()).collect();
    let reachable: Vec<&Path> = fs
        .writable
        .iter()
        .chain(&fs.readable)
        .map(|p| p.real())
        .collect();
    hidden(found, &grants, &reachable)
}

/// What an inherited variable points at, when it names a socket (or its companion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketTarget {
    /// A pathname socket (or a directory of them).
    Path(PathBuf),
    /// An abstract socket, an fd, or an address sbx-shell cannot place: dropped unless the
    /// variable is allowed by name.
    Unplaceable,
    /// Meaningful only with this other variable's socket (`SSH_AGENT_PID` with
    /// `SSH_AUTH_SOCK`): kept exactly when that one is.
    With(&'static str),
}

/// Variables that name a socket in a form of their own, by name: how each is read.
const KNOWN: &[(&str, Form)] = &[
    ("SSH_AUTH_SOCK", Form::Path),
    ("SSH_AGENT_PID", Form::With("SSH_AUTH_SOCK")),
    ("DBUS_SESSION_BUS_ADDRESS", Form::Dbus),
    ("DBUS_SYSTEM_BUS_ADDRESS", Form::Dbus),
    ("DISPLAY", Form::X11),
    ("XAUTHORITY", Form::With("DISPLAY")),
    ("WAYLAND_DISPLAY", Form::Wayland),
    ("WAYLAND_SOCKET", Form::Unplaceable),
    ("GPG_AGENT_INFO", Form::FirstOf(':')),
    ("TMUX", Form::FirstOf(',')),
    ("STY", Form::Unplaceable),
    ("DOCKER_HOST", Form::Url),
    ("CONTAINER_HOST", Form::Url),
    ("PULSE_SERVER", Form::Url),
    ("PIPEWIRE_REMOTE", Form::Url),
    ("KITTY_LISTEN_ON", Form::Url),
    ("NVIM", Form::Url),
    ("NVIM_LISTEN_ADDRESS", Form::Url),
    ("NOTIFY_SOCKET", Form::Url),
    ("SWAYSOCK", Form::Path),
    ("I3SOCK", Form::Path),
    ("NIRI_SOCKET", Form::Path),
    ("HYPRLAND_INSTANCE_SIGNATURE", Form::Unplaceable),
    ("WEZTERM_UNIX_SOCKET", Form::Path),
    ("VSCODE_IPC_HOOK", Form::Path),
    ("VSCODE_IPC_HOOK_CLI", Form::Path),
    ("VSCODE_GIT_IPC_HANDLE", Form::Path),
    ("EMACS_SOCKET_NAME", Form::Path),
    ("GNOME_KEYRING_CONTROL", Form::Path),
];

#[derive(Debug, Clone, Copy)]
enum Form {
    /// The value is the socket's path.
    Path,
    /// `unix:path=P[,…][;…]`, `unix:abstract=…`, `unix:runtime=yes`, `tcp:…`.
    Dbus,
    /// `:N[.S]` or `unix:N`: `/tmp/.X11-unix/XN`; `host:N` is TCP (the network policy's).
    X11,
    /// A name in `$XDG_RUNTIME_DIR` (`wayland-0`), or a path.
    Wayland,
    /// The path is the value up to this separator.
    FirstOf(char),
    /// `unix:///P`, `unix://P`, `unix:P`, `unix:@abstract`, `P`; `tcp://…` and `host:port`
    /// are the network policy's.
    Url,
    Unplaceable,
    With(&'static str),
}

/// Pure: what the variable `name` with `value` points at, if a socket; `runtime_dir` is
/// `$XDG_RUNTIME_DIR`. A variable sbx-shell does not know points at a socket when its value
/// is a path (or `unix:` address) that `is_socket` says is one.
pub fn variable_target(
    name: &str,
    value: &OsStr,
    runtime_dir: Option<&Path>,
    is_socket: &dyn Fn(&Path) -> bool,
) -> Option<SocketTarget> {
    let text = String::from_utf8_lossy(value.as_bytes());
    let path = |p: &str| Some(SocketTarget::Path(PathBuf::from(p)));
    let Some(form) = KNOWN.iter().find(|(n, _)| *n == name).map(|(_, f)| *f) else {
        let bare = strip_unix(&text);
        return (bare.starts_with('/') && is_socket(Path::new(bare)))
            .then(|| SocketTarget::Path(PathBuf::from(bare)));
    };
    match form {
        Form::Path => path(&text),
        Form::FirstOf(sep) => path(text.split(sep).next().unwrap_or("")),
        Form::With(other) => Some(SocketTarget::With(other)),
        Form::Unplaceable => Some(SocketTarget::Unplaceable),
        Form::X11 => {
            let display = text.strip_prefix("unix").unwrap_or(&text);
            let number = display.strip_prefix(':')?;
            let number = number.split('.').next().unwrap_or("");
            if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
                return Some(SocketTarget::Unplaceable);
            }
            path(&format!("/tmp/.X11-unix/X{number}"))
        }
        Form::Wayland => {
            if text.starts_with('/') {
                return path(&text);
            }
            match runtime_dir {
                Some(dir) => Some(SocketTarget::Path(dir.join(&*text))),
                None => Some(SocketTarget::Unplaceable),
            }
        }
        Form::Url => {
            if text.starts_with("tcp:") || !text.contains('/') && !text.starts_with("unix:") {
                return None;
            }
            let bare = strip_unix(&text);
            if bare.starts_with('/') {
                path(bare)
            } else {
                Some(SocketTarget::Unplaceable)
            }
        }
        Form::Dbus => {
            let mut paths = text.split(';').filter(|a| !a.is_empty()).map(|address| {
                let (transport, keys) = address.split_once(':').unwrap_or((address, ""));
                let key = |k: &str| {
                    keys.split(',')
                        .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                };
                match (transport, key("path"), key("runtime"), runtime_dir) {
                    ("unix", Some(p), _, _) if p.starts_with('/') => Some(PathBuf::from(p)),
                    ("unix", None, Some("yes"), Some(dir)) => Some(dir.join("bus")),
                    _ => None,
                }
            });
            // One address sbx-shell cannot place is enough to drop it.
            match (paths.next(), paths.next()) {
                (Some(Some(one)), None) => Some(SocketTarget::Path(one)),
                _ => Some(SocketTarget::Unplaceable),
            }
        }
    }
}

/// What decides whether a variable points at a hidden socket (`hides_variable`).
pub struct Variables<'a> {
    /// The variables themselves (a companion is kept exactly when its socket's is).
    pub all: &'a [(std::ffi::OsString, std::ffi::OsString)],
    /// `$XDG_RUNTIME_DIR`.
    pub runtime_dir: Option<&'a Path>,
    /// The socket grants, real paths.
    pub grants: &'a [&'a Path],
    pub is_socket: &'a dyn Fn(&Path) -> bool,
    /// The real path of a path, when it exists.
    pub real: &'a dyn Fn(&Path) -> Option<PathBuf>,
}

/// Pure: whether the variable `name` points at a socket no grant covers (an address
/// sbx-shell cannot place counts as one).
pub fn hides_variable(name: &str, value: &OsStr, vars: &Variables<'_>) -> bool {
    match variable_target(name, value, vars.runtime_dir, vars.is_socket) {
        None => false,
        Some(SocketTarget::Unplaceable) => true,
        Some(SocketTarget::Path(path)) => {
            let real = (vars.real)(&path).unwrap_or(path);
            !vars.grants.iter().any(|g| real.starts_with(g))
        }
        Some(SocketTarget::With(other)) => vars
            .all
            .iter()
            .find(|(n, _)| n == other)
            .is_some_and(|(_, v)| hides_variable(other, v, vars)),
    }
}

/// Whether an inherited variable (one of `inherited`) points at a host socket `policy`
/// hides; none is hidden when not `confined`.
pub fn variable_check<'a>(
    policy: &'a crate::policy::Policy,
    runtime_dir: Option<&'a Path>,
    inherited: &'a [(std::ffi::OsString, std::ffi::OsString)],
    confined: bool,
) -> impl Fn(&str, &OsStr) -> bool + 'a {
    let grants: Vec<&Path> = policy.filesystem.sockets.iter().map(|p| p.real()).collect();
    move |name, value| {
        let vars = Variables {
            all: inherited,
            runtime_dir,
            grants: &grants,
            is_socket: &is_socket,
            real: &|p| std::fs::canonicalize(p).ok(),
        };
        confined && hides_variable(name, value, &vars)
    }
}

/// The path of a `unix:` address: `unix:///p`, `unix://p`, `unix:path=p`, `unix:p`, or as is.
fn strip_unix(value: &str) -> &str {
    let Some(rest) = value.strip_prefix("unix:") else {
        return value;
    };
    let rest = rest.strip_prefix("path=").unwrap_or(rest);
    match rest.strip_prefix("//") {
        Some(after) => after,
        None => rest,
    }
}

#[cfg(test)]
mod unix_type_tests {
    #[test]
    fn a_unix_sockets_type_is_read_by_its_inode() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 21406 /run/systemd/private\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 9951 @/org/kernel/udev\n\
            0000000000000000: 00000003 00000000 00000000 0005 03 777\n";
        assert_eq!(
            super::unix_socket_type(text, 21406),
            Some(libc::SOCK_STREAM)
        );
        assert_eq!(super::unix_socket_type(text, 9951), Some(libc::SOCK_DGRAM));
        assert_eq!(
            super::unix_socket_type(text, 777),
            Some(libc::SOCK_SEQPACKET)
        );
        assert_eq!(super::unix_socket_type(text, 12), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn an_inet_socket_is_made_again_from_its_protocol_name() {
        use libc::{AF_INET, AF_INET6, SOCK_DGRAM, SOCK_STREAM};
        assert_eq!(
            super::inet_socket_kind(b"TCP"),
            Some((AF_INET, SOCK_STREAM, 0))
        );
        assert_eq!(
            super::inet_socket_kind(b"UDPv6"),
            Some((AF_INET6, SOCK_DGRAM, 0))
        );
        assert_eq!(
            super::inet_socket_kind(b"PING"),
            Some((AF_INET, SOCK_DGRAM, libc::IPPROTO_ICMP))
        );
        // The protocol a raw socket was made with is not in its name; a unix socket's
        // type is read from the kernel's list instead.
        assert_eq!(super::inet_socket_kind(b"RAW"), None);
        assert_eq!(super::inet_socket_kind(b"UNIX-STREAM"), None);
    }
}

/// Whether a TCP socket of this process's network namespace listens on `port`, at any
/// local address (`/proc/net/tcp`, `tcp6`): what a program could read there itself.
pub fn tcp_listens(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|table| std::fs::read_to_string(table).is_ok_and(|text| listens_on(&text, port)))
}

/// Whether a UDP socket of this process's network namespace is bound to `port`, at any
/// local address (`/proc/net/udp`, `udp6`).
pub fn udp_bound(port: u16) -> bool {
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .any(|table| std::fs::read_to_string(table).is_ok_and(|text| holds_port(&text, port, None)))
}

/// Whether a `/proc/net/tcp` (or `tcp6`) table holds a listening socket (state `0A`) on
/// `port`, at any local address. Pure.
pub fn listens_on(table: &str, port: u16) -> bool {
    holds_port(table, port, Some("0A"))
}

/// Whether a `/proc/net` socket table holds a socket whose local port is `port` (in
/// `state`, when given). Pure.
fn holds_port(table: &str, port: u16, state: Option<&str>) -> bool {
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        let local = fields.next().unwrap_or("");
        let now = fields.nth(1).unwrap_or("");
        let at = local
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
        at == Some(port) && state.is_none_or(|want| want == now)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listening_port_is_read_from_the_kernels_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:A5B6 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";
        assert!(listens_on(table, 8080));
        assert!(
            !listens_on(table, 0xA5B6),
            "an established socket is not a listener"
        );
        assert!(!listens_on(table, 9));
        let v6 =
            "  sl  local_address                         remote_address                        st
   0: 00000000000000000000000000000000:1538 00000000000000000000000000000000:0000 0A 0
";
        assert!(listens_on(v6, 5432));
        assert!(!listens_on("", 5432));
        // A UDP table: any socket bound to the port (the sandbox's name server on 53).
        let udp = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 1234: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0 0
";
        assert!(holds_port(udp, 53, None));
        assert!(!holds_port(udp, 54, None));
        assert!(!listens_on(udp, 53));
    }

    #[test]
    fn the_kernel_list_gives_pathname_sockets_with_their_spaces() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 27317 /run/user/1000/bus\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 27320 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 27321\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 27322 /home/u/my dir/s.sock\n";
        assert_eq!(
            parse_kernel_list(text),
            [
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from("/home/u/my dir/s.sock")
            ]
        );
    }

    fn found() -> HostSockets {
        HostSockets {
            runtime_dirs: vec!["/run/user/0".into(), "/run/user/1000".into()],
            sockets: vec![
                "/home/u/.gnupg/S.gpg-agent".into(),
                "/run/docker.sock".into(),
                "/run/user/1000/bus".into(),
                "/run/user/1000/gnupg/S.gpg-agent".into(),
                "/tmp/ssh-X/agent.1".into(),
            ],
        }
    }

    fn paths(v: &[PathBuf]) -> Vec<&str> {
        v.iter().map(|p| p.to_str().unwrap()).collect()
    }

    #[test]
    fn runtime_directories_go_whole_and_the_other_sockets_one_by_one() {
        let h = hidden(&found(), &[], &[]);
        assert_eq!(paths(&h.dirs), ["/run/user/0", "/run/user/1000"]);
        assert_eq!(
            paths(&h.sockets),
            [
                "/home/u/.gnupg/S.gpg-agent",
                "/run/docker.sock",
                "/tmp/ssh-X/agent.1"
            ]
        );
        assert!(h.granted.is_empty());
    }

    #[test]
    fn a_grant_keeps_its_socket_and_opens_its_runtime_directory_socket_by_socket() {
        let grant = Path::new("/run/user/1000/gnupg");
        let h = hidden(&found(), &[grant, Path::new("/run/docker.sock")], &[]);
        assert_eq!(paths(&h.dirs), ["/run/user/0"]);
        assert_eq!(
            paths(&h.sockets),
            [
                "/home/u/.gnupg/S.gpg-agent",
                "/run/user/1000/bus",
                "/tmp/ssh-X/agent.1"
            ]
        );
        assert_eq!(
            paths(&h.granted),
            ["/run/docker.sock", "/run/user/1000/gnupg/S.gpg-agent"]
        );
        // A writable path inside a runtime directory: the directory stays, its sockets not.
        let h = hidden(&found(), &[], &[Path::new("/run/user/1000/app")]);
        assert_eq!(paths(&h.dirs), ["/run/user/0"]);
        assert!(paths(&h.sockets).contains(&"/run/user/1000/bus"));
    }

    #[test]
    fn variables_are_read_in_their_own_forms() {
        let none = |_: &Path| false;
        let at = |name: &str, value: &str| {
            variable_target(
                name,
                OsStr::new(value),
                Some(Path::new("/run/user/1000")),
                &none,
            )
        };
        let p = |s: &str| Some(SocketTarget::Path(PathBuf::from(s)));
        assert_eq!(
            at("SSH_AUTH_SOCK", "/tmp/ssh-X/agent.1"),
            p("/tmp/ssh-X/agent.1")
        );
        assert_eq!(
            at("SSH_AGENT_PID", "42"),
            Some(SocketTarget::With("SSH_AUTH_SOCK"))
        );
        assert_eq!(
            at(
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/run/user/1000/bus,guid=1"
            ),
            p("/run/user/1000/bus")
        );
        assert_eq!(
            at("DBUS_SESSION_BUS_ADDRESS", "unix:runtime=yes"),
            p("/run/user/1000/bus")
        );
        assert_eq!(
            at("DBUS_SESSION_BUS_ADDRESS", "unix:abstract=/tmp/dbus-1"),
            Some(SocketTarget::Unplaceable)
        );
        assert_eq!(
            at("DBUS_SESSION_BUS_ADDRESS", "unix:path=/a;unix:path=/b"),
            Some(SocketTarget::Unplaceable)
        );
        assert_eq!(at("DISPLAY", ":0"), p("/tmp/.X11-unix/X0"));
        assert_eq!(at("DISPLAY", ":12.1"), p("/tmp/.X11-unix/X12"));
        assert_eq!(at("DISPLAY", "localhost:10.0"), None);
        assert_eq!(
            at("WAYLAND_DISPLAY", "wayland-0"),
            p("/run/user/1000/wayland-0")
        );
        assert_eq!(
            at("TMUX", "/tmp/tmux-0/default,123,0"),
            p("/tmp/tmux-0/default")
        );
        assert_eq!(
            at("DOCKER_HOST", "unix:///run/docker.sock"),
            p("/run/docker.sock")
        );
        assert_eq!(at("DOCKER_HOST", "tcp://10.0.0.1:2375"), None);
        assert_eq!(
            at("KITTY_LISTEN_ON", "unix:@kitty"),
            Some(SocketTarget::Unplaceable)
        );
        assert_eq!(
            at("NVIM", "/run/user/1000/nvim.1.0"),
            p("/run/user/1000/nvim.1.0")
        );
        assert_eq!(at("NVIM", "127.0.0.1:6666"), None);
        assert_eq!(at("EDITOR", "vim"), None);
        assert_eq!(at("HOME", "/root"), None);
    }

    #[test]
    fn a_variable_is_hidden_unless_a_grant_covers_its_socket() {
        let all: Vec<(std::ffi::OsString, std::ffi::OsString)> = [
            ("SSH_AUTH_SOCK", "/tmp/ssh-X/agent.1"),
            ("SSH_AGENT_PID", "42"),
            ("DISPLAY", ":0"),
            ("XAUTHORITY", "/home/u/.Xauthority"),
            ("TERM", "xterm"),
        ]
        .iter()
        .map(|(n, v)| (n.into(), v.into()))
        .collect();
        let check = |grants: &[&Path]| -> Vec<String> {
            let vars = Variables {
                all: &all,
                runtime_dir: None,
                grants,
                is_socket: &|_| false,
                real: &|_| None,
            };
            all.iter()
                .filter(|(n, v)| hides_variable(n.to_str().unwrap(), v, &vars))
                .map(|(n, _)| n.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            check(&[]),
            ["SSH_AUTH_SOCK", "SSH_AGENT_PID", "DISPLAY", "XAUTHORITY"]
        );
        assert_eq!(
            check(&[Path::new("/tmp/ssh-X/agent.1")]),
            ["DISPLAY", "XAUTHORITY"]
        );
        assert_eq!(
            check(&[Path::new("/tmp/.X11-unix")]),
            ["SSH_AUTH_SOCK", "SSH_AGENT_PID"]
        );
    }

    #[test]
    fn an_unknown_variable_points_at_a_socket_when_its_path_is_one() {
        let sock = |p: &Path| p == Path::new("/run/app/ctl.sock");
        let at = |value: &str| variable_target("APP_CTL", OsStr::new(value), None, &sock);
        let p = Some(SocketTarget::Path(PathBuf::from("/run/app/ctl.sock")));
        assert_eq!(at("/run/app/ctl.sock"), p);
        assert_eq!(at("unix:/run/app/ctl.sock"), p);
        assert_eq!(at("unix:path=/run/app/ctl.sock"), p);
        assert_eq!(at("unix:///run/app/ctl.sock"), p);
        assert_eq!(at("/run/app"), None);
    }
}
