//! The network allow-list proxy: an HTTP proxy (CONNECT tunnels and plain HTTP) that sbx-shell
//! runs outside the sandbox, in its own threads, for a policy with `network: {allow: …}`.
//!
//! The sandbox has no network of its own, only a way to this proxy (see `sandbox`): inside
//! bwrap, a loopback port of the sandbox's private network namespace whose listening socket
//! the helper hands over (so the proxy accepts connections from inside the namespace, and
//! nothing outside can reach that port); with Landlock alone or Seatbelt, a loopback port of
//! the host that is the only TCP destination the sandbox may connect to.
//!
//! A `CONNECT` to the host of a credential the session adds (`--credential`) is answered
//! here, in TLS of the session's own, and its requests get the real value (`inject`);
//! every other `CONNECT` is a tunnel, end to end.
//!
//! Names are resolved here, never inside; a name must lead to a public address (else an
//! allowed name could be pointed at this machine), unless `--resolve` set its address.
//! Decisions are pure (`request`); this file only moves bytes. Every refusal is written to
//! the network log and counted for the summary line at the end of the session.
//!
//! The threads never panic on input (a panic aborts sbx-shell) and block every signal, so
//! signals keep reaching the supervisor's main thread.

pub mod agent;
pub mod connect;
pub mod forward;
pub mod inject;
pub mod lookups;
mod messages;
pub mod request;
pub mod session;

mod proxy;
pub use proxy::{proxy_env, NO_NETWORK_ENV, SANDBOX_PORT};
