//! Step 9 of a run: the summary of what the sandbox refused, on stderr once the terminal is
//! restored, and the session's line in the session log with every refusal.

use super::context::Run;
use crate::session::log;

/// Step 9: the refusals' summary on stderr (one line with `--quiet`, nothing when nothing
/// was refused) and the session's line in the session log.
pub(super) fn record(
    run: &Run,
    code: &std::io::Result<u8>,
    planted: &[crate::protect::planted::Planted],
) {
    let (plan, say) = (&run.plan, run.say);
    let tally = run.journal.tally();
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
        run.started,
        std::iter::once(&launch.program).chain(&launch.args),
        run.host.place.cwd.as_deref().ok(),
        &plan.policy,
        &run.backend,
        *code,
        run.net().map_or(0, |n| n.proxy.refused()),
    )
    .with_planted(planted)
    .with_refusals(tally);
    if let Err(e) = log::append(&plan.home, &record) {
        say.detail(&format!("sbx-shell: cannot write the session log: {e}"));
    }
}
