//! Socket calls the guard makes for the program: addresses as the bytes a program's memory
//! holds them in, unix sockets by path or abstract name, and a socket's options.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::sys::socket::{connect, setsockopt, sockopt, UnixAddr};

/// The network namespace's loopback interface up (`lo`: it starts down in a new one).
pub fn loopback_up() -> io::Result<()> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType};
    let socket = nix::sys::socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: a zeroed ifreq is valid (a name and a union of plain integers).
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
        *to = *from as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS and SIOCSIFFLAGS read and write the ifreq we own.
    unsafe {
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) == -1 {
            return Err(io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A new socket (`flags`: SOCK_NONBLOCK, SOCK_CLOEXEC added to `kind`).
pub fn socket(family: i32, kind: i32, protocol: i32) -> io::Result<OwnedFd> {
    // SAFETY: integer arguments; a new descriptor or -1.
    let fd = unsafe { libc::socket(family, kind, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// SO_REUSEADDR set, as a server sets it before it binds.
pub fn reuse_address(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(io::Error::from)
}

/// `fd` bound to `addr`, a `sockaddr` of its length in bytes.
pub fn bind_bytes(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len()).map_err(|_| einval())?;
    // SAFETY: `addr` is valid for `len` bytes, which bind reads.
    if unsafe { libc::bind(fd.as_raw_fd(), addr.as_ptr().cast(), len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `fd` connected to `addr`, a `sockaddr` of its length in bytes.
pub fn connect_bytes(fd: BorrowedFd<'_>, addr: &[u8]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(addr.len()).map_err(|_| einval())?;
    // SAFETY: `addr` is valid for `len` bytes, which connect reads.
    if unsafe { libc::connect(fd.as_raw_fd(), addr.as_ptr().cast(), len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The address `fd` is bound to, as the bytes of its `sockaddr`.
pub fn local_address(fd: BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    let mut addr = [0u8; std::mem::size_of::<libc::sockaddr_storage>()];
    let mut len = addr.len() as libc::socklen_t;
    // SAFETY: getsockname writes at most `len` bytes into `addr` and says how many.
    if unsafe { libc::getsockname(fd.as_raw_fd(), addr.as_mut_ptr().cast(), &mut len) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(addr.get(..len as usize).unwrap_or(&addr).to_vec())
}

/// `fd` connected to the unix socket at `path`.
pub fn connect_unix(fd: BorrowedFd<'_>, path: &str) -> io::Result<()> {
    let to = UnixAddr::new(path).map_err(io::Error::from)?;
    connect(fd.as_raw_fd(), &to).map_err(io::Error::from)
}

/// `fd` connected to the abstract unix socket `name`.
pub fn connect_abstract(fd: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let to = UnixAddr::new_abstract(name.as_bytes()).map_err(io::Error::from)?;
    connect(fd.as_raw_fd(), &to).map_err(io::Error::from)
}

/// A socket's integer option at level `SOL_SOCKET` (`SO_ERROR`, `SO_DOMAIN`).
pub fn int_option(fd: BorrowedFd<'_>, option: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the option writes one int into `value`, whose size `size` gives.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&mut value as *mut libc::c_int).cast(),
            &mut size,
        )
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// The name of the protocol the socket at `path` (a descriptor's magic link) was made with
/// (its `system.sockprotoname`: "TCP", "UDPv6", "UNIX-STREAM" …).
pub fn protocol_name(path: &CStr) -> Option<Vec<u8>> {
    let mut name = [0u8; 64];
    // SAFETY: NUL-terminated path and attribute name; `name` is valid for its length.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"system.sockprotoname".as_ptr(),
            name.as_mut_ptr().cast(),
            name.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    let name = name.get(..n)?;
    Some(name.strip_suffix(b"\0").unwrap_or(name).to_vec())
}

fn einval() -> io::Error {
    io::Error::from_raw_os_error(libc::EINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_socket_bound_by_its_bytes_says_its_address_and_unix_ones_connect_by_path() {
        let fd = socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0).unwrap();
        reuse_address(fd.as_fd()).unwrap();
        // 127.0.0.1, port 0 (any).
        let mut addr = vec![0u8; std::mem::size_of::<libc::sockaddr_in>()];
        addr[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        addr[4..8].copy_from_slice(&[127, 0, 0, 1]);
        bind_bytes(fd.as_fd(), &addr).unwrap();
        let bound = local_address(fd.as_fd()).unwrap();
        assert_eq!(bound.len(), addr.len());
        assert_eq!(&bound[4..8], &[127, 0, 0, 1]);
        assert_ne!(
            u16::from_be_bytes([bound[2], bound[3]]),
            0,
            "a port was given"
        );
        assert_eq!(
            int_option(fd.as_fd(), libc::SO_DOMAIN).unwrap(),
            libc::AF_INET
        );
        let dir = std::env::temp_dir().join(format!("sbx-sock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s");
        let _server = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let client = socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0).unwrap();
        connect_unix(client.as_fd(), path.to_str().unwrap()).unwrap();
        let fd_path = std::ffi::CString::new(format!("/proc/self/fd/{}", client.as_raw_fd()));
        assert_eq!(
            protocol_name(&fd_path.unwrap()).as_deref(),
            Some(&b"UNIX-STREAM"[..])
        );
        let other = socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0).unwrap();
        assert!(connect_abstract(other.as_fd(), "sbx-no-such-name").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
