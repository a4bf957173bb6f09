//! Step 9 of a run: the summary of what the sandbox refused, on stderr once the terminal is
//! restored, and the session's line in the session log with every refusal.

use super::prepare::Plan;
use crate::host::Host;
use crate::netproxy::session::ProxySession;
use crate::sandbox::Backend;
use crate::session::journal::Journal;
use crate::session::log;
use crate::sys::say::Verbosity;
use std::time::SystemTime;

/// Step 9: the refusals' summary on stderr (one line with `--quiet`, nothing when nothing
/// was refused) and the session's line in the session log.
pub(super) fn record(
    plan: &Plan,
    (backend, host): (&Backend, &Host),
    started: SystemTime,
    (code, planted): (&std::io::Result<u8>, &[crate::protect::planted::Planted]),
    (net, journal): (Option<&ProxySession>, &Journal),
    say: Verbosity,
) {
    let tally = journal.tally();
    if say.quiet {
        if let Some(line) = tally.one_line() {
            say.always(&line);
        }
    } else {
        for line in tally.summary(&plan.policy.filesystem.home.path) {
            say.always(&line);
        }
    }
    let Ok(code) = code else { return };
    let launch = &plan.launch;
    let record = log::SessionRecord::new(
        started,
        std::iter::once(&launch.program).chain(&launch.args),
        host.place.cwd.as_deref().ok(),
        &plan.policy,
        backend,
        *code,
        net.map_or(0, |n| n.proxy.refused()),
    )
    .with_planted(planted)
    .with_refusals(tally);
    if let Err(e) = log::append(&plan.home, &record) {
        say.detail(&format!("sbx-shell: cannot write the session log: {e}"));
    }
}
