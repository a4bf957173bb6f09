//! Step 9 of a run: the end lines on stderr and the session's line in the session log.

use super::prepare::Plan;
use crate::host::Host;
use crate::netproxy::session::ProxySession;
use crate::sandbox::Backend;
use crate::session::log;
use crate::sys::say::Verbosity;
use std::time::SystemTime;

/// Step 9: the network summary on stderr and the session's line in the session log.
pub(super) fn record(
    plan: &Plan,
    (backend, host): (&Backend, &Host),
    started: SystemTime,
    (code, planted, ended_by_guard): (
        &std::io::Result<u8>,
        &[crate::protect::planted::Planted],
        bool,
    ),
    net: Option<&ProxySession>,
    say: Verbosity,
) {
    if let Some(line) = net.and_then(|n| n.proxy.summary()) {
        say.note(&line);
    }
    let Ok(code) = code else { return };
    let launch = &plan.launch;
    let record = log::Record::new(
        started,
        std::iter::once(&launch.program).chain(&launch.args),
        host.place.cwd.as_deref().ok(),
        &plan.policy,
        backend,
        *code,
        net.map_or(0, |n| n.proxy.refused()),
    )
    .with_planted(planted, ended_by_guard);
    if let Err(e) = log::append(&plan.home, &record) {
        say.detail(&format!("sbx-shell: cannot write the session log: {e}"));
    }
}

/// The end line for clipboard requests the relay refused.
fn clipboard_line(refused: u64, policy: crate::policy::config::Clipboard) -> String {
    let times = if refused == 1 {
        "once".to_string()
    } else {
        format!("{refused} times")
    };
    let fix = match policy {
        crate::policy::config::Clipboard::None => "--clipboard write lets it set the clipboard",
        _ => "--clipboard read-write lets it read the clipboard too",
    };
    format!(
        "sbx-shell: the program asked for the terminal's clipboard {times}: refused (clipboard: {}). {fix}",
        policy.name()
    )
}

/// The session's exit code, once the clipboard requests the relay refused are said.
pub(super) fn ended(
    ended: &crate::session::Ended,
    clipboard: crate::policy::config::Clipboard,
    say: Verbosity,
) -> u8 {
    if ended.clipboard_refused > 0 {
        say.note(&clipboard_line(ended.clipboard_refused, clipboard));
    }
    ended.code
}
