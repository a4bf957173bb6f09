//! The sandbox backends by name: what each is, and what it is called on the command line
//! and in the config.

use std::path::PathBuf;

/// The backend that confines this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// macOS: Seatbelt through /usr/bin/sandbox-exec.
    Seatbelt,
    /// Linux: bubblewrap namespaces, with seccomp inside and Landlock when the kernel has
    /// the ABI the rules need.
    Bwrap { path: PathBuf, landlock: bool },
    /// Linux: Landlock and seccomp alone, with the process guard.
    Landlock,
    /// Nothing: only when asked for by name.
    None,
}

impl Backend {
    /// The name the child sees in `SBX_SANDBOX`.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Seatbelt => "seatbelt",
            Backend::Bwrap { .. } => "bwrap",
            Backend::Landlock => "landlock",
            Backend::None => "none",
        }
    }

    /// The layers that enforce the policy, outermost first.
    pub fn layers(&self) -> Vec<&'static str> {
        match self {
            Backend::Seatbelt => vec!["seatbelt"],
            Backend::Bwrap { landlock: true, .. } => vec!["bwrap", "landlock", "seccomp"],
            Backend::Bwrap {
                landlock: false, ..
            } => vec!["bwrap", "seccomp"],
            Backend::Landlock => vec!["landlock", "seccomp"],
            Backend::None => vec![],
        }
    }
}
