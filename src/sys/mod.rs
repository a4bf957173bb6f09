//! Thin wrappers over the operating system's calls, each small and safe to call.

#[cfg(target_os = "linux")]
pub mod at;
#[cfg(target_os = "linux")]
pub mod capabilities;
pub mod exit;
pub mod fdpass;
pub mod files;
pub mod handlers;
#[cfg(target_os = "linux")]
pub mod kernel;
#[cfg(target_os = "linux")]
pub mod pidfd;
pub mod process;
pub mod say;
#[cfg(target_os = "linux")]
pub mod seccomp;
#[cfg(target_os = "linux")]
pub mod socket;
pub mod terminal;
#[cfg(target_os = "linux")]
pub mod timer;
#[cfg(target_os = "linux")]
pub mod title;
#[cfg(target_os = "linux")]
pub mod userns;
