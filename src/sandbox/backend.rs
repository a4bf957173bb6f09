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
    /// Linux: a container of Docker's or Podman's (`sandbox::container`), inside which the
    /// helper applies Landlock, seccomp and the guard as under Landlock alone.
    Container(Container),
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
            Backend::Container(c) => c.engine.name(),
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
            Backend::Container(c) => vec![c.engine.name(), "landlock", "seccomp"],
            Backend::None => vec![],
        }
    }
}

impl Backend {
    /// Whether the program is confined by Landlock, seccomp and the guard alone, in no
    /// mount namespace of sbx-shell's making: Landlock alone, and inside a container (whose
    /// mounts are the engine's).
    pub fn landlock_alone(&self) -> bool {
        match self {
            Backend::Landlock | Backend::Container(_) => true,
            Backend::Seatbelt | Backend::Bwrap { .. } | Backend::None => false,
        }
    }

    /// Whether the program gets a network namespace of the session's own when the policy
    /// gives it no network or an allow-list: bwrap's, a container's (`--network none`).
    /// Nothing but its loopback is there, where the helper opens the ports of sbx-shell's
    /// proxy and name server (`netproxy`); the program's own TCP stays inside it.
    pub fn network_of_its_own(&self) -> bool {
        match self {
            Backend::Bwrap { .. } | Backend::Container(_) => true,
            Backend::Seatbelt | Backend::Landlock | Backend::None => false,
        }
    }
}

/// A container backend: which engine, and the command-line client that reaches it (as it
/// finds its engine: `DOCKER_HOST`, a context, Podman's socket). The image is the
/// policy's (`Policy::image`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    pub engine: Engine,
    pub cli: PathBuf,
}

/// The container engines sbx-shell drives through their clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

impl Engine {
    /// The engine's name, which is also its client's.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }
}
