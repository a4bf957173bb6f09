//! Sandbox backends. Each is a pure builder that turns the policy into what runs (an argv
//! prefix, a profile, rule tables) plus a small, platform-gated launch.

pub mod seatbelt;
