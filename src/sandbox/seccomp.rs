//! The seccomp layer (Linux): the syscall rules the helper installs just before exec, as a
//! table. Installing it is the helper's job.
//!
//! Every rule returns EPERM. Another architecture's calls kill the process; the x32 ABI
//! (system call numbers with bit 30 set on x86_64) is refused; ioctl requests are compared
//! on their low 32 bits (the kernel ignores the high ones).
//!
//! Compiling the table to BPF is `bpf.rs` (Linux only, gated once), with the emitter of
//! `sandbox::bpf`; the table is pure and the same everywhere.
//!
//! Sockets with network none: AF_UNIX, and AF_NETLINK with protocol NETLINK_ROUTE only.
//! Route netlink answers getifaddrs() and if_nameindex(), which glibc, Go and node use to
//! list interfaces (inside the bwrap layer only `lo` exists); it cannot move data off the
//! machine. Other netlink families (audit, netfilter, sock_diag, uevents) and every other
//! address family (AF_INET* — but TCP alone, below —, AF_PACKET, AF_VSOCK — which reached the hypervisor from this VM)
//! are denied.
//!
//! Under bwrap, with no network or an allow-list, AF_INET and AF_INET6 are allowed too: the
//! sandbox's network namespace has nothing but its own loopback, where sbx-shell's proxy
//! and name server listen (`netproxy::lookups`); where TCP may go there is Landlock's
//! port rule.
//! Alone, an allow-list allows them as stream sockets only (TCP, to reach the proxy's
//! loopback port, which Landlock's port rule is about): no UDP, so no DNS of one's own;
//! with no network, none.

#[cfg(target_os = "linux")]
mod bpf;

/// Elsewhere there is no seccomp: a filter cannot be checked, let alone installed.
#[cfg(not(target_os = "linux"))]
mod bpf {
    pub fn check(_filter: &super::Filter) -> Result<(), super::SeccompError> {
        Err(super::SeccompError::Unsupported)
    }
}

pub use bpf::*;

mod filter;
pub use filter::{build_filter, Condition, Filter, SeccompError};
