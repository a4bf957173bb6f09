//! `sbx-shell explain`: the policy a run would resolve to, and what each backend would run
//! for it on this machine.

mod render;
pub mod report;

use crate::cli::ExplainArgs;
use crate::cmd::inputs;
use crate::host::Host;
use crate::netproxy;
use crate::policy::profiles;
use crate::sandbox::select;
use crate::sys::exit::Failure;

pub fn main(args: &ExplainArgs) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let user_config = profiles::load_user_config(&inputs::config_dir(&home))?;
    let program = args.command.first().map(|c| c.as_os_str());
    let (policy_args, _) = inputs::with_agent_profile(&args.policy, program);
    let policy = inputs::resolve(&policy_args, &home, user_config)?;
    let host = Host::measure(crate::host::Probes::Skip);
    let selected = host
        .machine
        .with_engine(policy.container.engine.as_deref())
        .and_then(|machine| select::select(policy.backend, &machine).map_err(|e| e.to_string()));
    // The proxy's port as inside bwrap; elsewhere it is picked when the session starts.
    let report = report::report(
        &policy,
        &args.command,
        &host,
        Some(netproxy::SANDBOX_PORT),
        report::Selected::of(selected.as_ref().map_err(Clone::clone)),
    );
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else if let Some(backend) = args.show {
        render::render_backend(&report, backend)
    } else {
        render::render_text(&report)
    };
    crate::sys::say::write_stdout(text.as_bytes())
}
