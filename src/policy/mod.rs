//! The resolved, canonical policy that every backend reads. Pure: no I/O (the filesystem is
//! asked through the `PathResolver` trait) and no `cfg(target_os)` — a Linux machine can
//! resolve and review a macOS policy and the reverse.
//!
//! Layers merge in precedence order: built-in defaults < user config < profile < flags
//! (flags arrive as one more `Config` layer). Scalars: the last layer that sets one wins.
//! Lists: every layer adds. Paths are resolved once, here: `~` expanded, relative paths
//! taken inside the workspace, `..` and control characters rejected, symlinks resolved with
//! both spellings kept when they differ (macOS's `/tmp` is `/private/tmp`).

pub mod config;
pub mod credentials;
mod domains;
pub mod entry;
pub mod gitconfig;
pub mod home;
pub mod inject;
pub mod launch;
pub mod npmseed;
pub mod profiles;
pub mod program;
pub mod refusal;
pub mod report;
pub mod shell;
pub mod ssh;
pub mod verdict;

pub mod container;
pub use container::ContainerUser;
pub(crate) mod model;
pub use model::{
    state_to_create, DomainRule, Filesystem, Injected, Layer, Limits, Network, PathContext,
    PathResolver, Policy, ResolvedPath, Seed, ALWAYS_DROPPED, KEYCHAINS,
};

mod resolve;
pub use resolve::{defaults_layer, parse_domain_rule, resolve, resolve_path};

#[cfg(test)]
pub mod test_support;
