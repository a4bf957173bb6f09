//! The end-to-end suite: one test binary driving the real `sbx-shell` binary from real
//! terminals (a pty the test opens, or tmux). See docs/testing.md.

// The suite reads /proc and uses Linux ioctls; macOS is covered by unit tests and clippy.
#![cfg(target_os = "linux")]
// A test's job is to fail loudly: unwrap and expect are the right tools here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
