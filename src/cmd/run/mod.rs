//! What sbx-shell does without a subcommand: run the program in the sandbox. `main` is
//! the steps, each one call with plain data in and out, read top to bottom:
//!
//! 1. resolve the request and the policy (`prepare::resolve`): the real shell, the launch
//!    plan, the program checked, the profile, the configuration layers;
//! 2. measure the host, once, with bwrap's probe when the policy may use it;
//! 3. choose the backend, refuse a missing required layer, and name each layer `auto`
//!    wanted but cannot run;
//! 4. start the network: the proxy and the name server, for an allow-list or no network;
//!    then what the policy names besides: the credentials (4a) and the ssh agent (4b).
//!    The plan is final from here: with the machine, the backend, the journal and what
//!    was started, it is the run's context (`context::Run`), which every later step reads;
//! 5. make the session's places (`environment::Places`) and the program's environment, and
//!    build the in-process layers (`argv::confine`), so that a policy a layer refuses
//!    fails before the terminal is touched; start the cgroup and record the places that
//!    would run code outside (`planted::PlantedCheck`);
//! 6. open the session (`Session::open`: the terminal raw, the inner pty);
//! 7. build the argv once: the helper's, wrapped in the launcher (`argv::Launcher`);
//! 8. run it until the end (`Session::run`);
//! 9. report: the refusals' summary and the session log (`report`).
//!
//! Every refusal goes, as it happens, to the session's journal (`session::journal`): the
//! proxy's and the name lookups' from step 4, the dropped variables from step 5, the
//! guard's through a pipe from step 7, the relay's clipboard requests from step 8.
//!
//! What runs on Linux only sits behind one gate (`os`: `linux.rs`, `other.rs`). Nothing
//! below calls back up into this file.

mod argv;
mod container;
mod context;
mod credentials;
mod disarm;
mod environment;
mod messages;
mod planted;
mod prepare;
mod report;
mod sessiondir;
mod ssh;

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;
#[cfg(not(target_os = "linux"))]
#[path = "other.rs"]
mod os;

use std::io::IsTerminal;
use std::time::SystemTime;

use anyhow::Context as _;

use crate::cli::{Cli, PtyMode};
use crate::session::journal::{self, Journal};
use crate::session::pty;
use crate::session::{Child, Session, SessionOptions};
use crate::sys::exit::Failure;
use crate::sys::process;
use context::Run;

pub fn main(cli: Cli, login_arg0: bool) -> Result<u8, Failure> {
    let started = SystemTime::now();
    let say = cli.verbosity();
    begin()?;
    let mut plan = prepare::resolve(&cli, login_arg0, say)?;
    let host = prepare::measure_host(&plan);
    let backend = prepare::choose_backend(&plan, &host, say)?;
    plan.root_files(os::root_as(&plan.policy, &backend), &backend, say)?;
    let (journal, journal_file) = Journal::open(&journal::dir(&plan.home));
    let net = prepare::start_network(&plan, &backend, &cli, journal.sink(), say)?;
    let credentials = credentials::start(&mut plan, &backend, net.as_ref(), say)?;
    let (ssh, questions) = ssh::start(&mut plan, &backend, net.as_ref(), &journal, say)?;
    let mut run = Run {
        ssh,
        credentials,
        net,
        journal,
        _journal_file: journal_file,
        plan,
        host,
        backend,
        started,
        say,
    };
    let mut places = environment::Places::make(&run)?;
    let env = environment::child_env(&run, &places);
    let mut layers = argv::confine(&run, &places, &env)?;
    os::read_landlock_refusals(&run, &mut layers);
    let pools = os::make_pools(&run.plan, &mut layers);
    os::note_linked(&run, &layers, &places.git);
    let cgroup = prepare::start_cgroup(&run.plan, &run.backend, say)?;
    let planted_check = planted::PlantedCheck::start(&run.plan, &layers, &places.git, &env);
    let session = Session::open(wants_pty(
        cli.pty,
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    ))?;
    let launcher = argv::Launcher::build(&run, &layers, &places, &session, os::helper_exe()?)?;
    let child = Child {
        argv: launcher.argv.clone(),
        env,
        options: SessionOptions {
            cgroup: cgroup
                .as_ref()
                .map(crate::session::cgroup::SessionCgroup::fds),
            ..argv::session_options(&run.plan.policy, &layers)
        },
        refusals: Some(run.journal.sink()),
        questions,
    };
    let code = session.run(child).map(|ended| ended.code);
    if let Some(cgroup) = cgroup {
        cgroup.end();
    }
    places.end_temp();
    drop(pools);
    let mut planted = planted_check.finish(&run.plan.policy);
    drop(launcher);
    drop(run.ssh.take());
    run.journal.drain(std::time::Duration::from_millis(500));
    planted.extend(disarm::after(&run));
    report::record(&run, &code, &planted);
    let program = run.plan.launch.program.to_string_lossy();
    code.with_context(|| format!("cannot run {program}"))
        .map_err(Failure::from)
}

/// What the supervisor sets in itself before it makes anything: what it inherited above
/// stderr is its parent's, for none of its children (the descriptors it hands on — the
/// lifeline, the spec, the courier's pipes — it makes itself, after this); it is the
/// subreaper of all the program starts; a panic restores the terminal.
fn begin() -> Result<(), Failure> {
    crate::sys::files::cloexec_above_stderr()
        .context("cannot keep inherited descriptors from the sandbox")
        .map_err(Failure::from)?;
    process::install_subreaper();
    pty::install_panic_hook();
    Ok(())
}

/// `--pty auto` means a pty only when both stdin and stdout are terminals.
pub fn wants_pty(mode: PtyMode, stdin_tty: bool, stdout_tty: bool) -> bool {
    match mode {
        PtyMode::Auto => stdin_tty && stdout_tty,
        PtyMode::Always => true,
        PtyMode::Never => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_wants_a_pty_only_between_two_terminals() {
        assert!(wants_pty(PtyMode::Auto, true, true));
        assert!(!wants_pty(PtyMode::Auto, false, true));
        assert!(!wants_pty(PtyMode::Auto, true, false));
        assert!(wants_pty(PtyMode::Always, false, false));
        assert!(!wants_pty(PtyMode::Never, true, true));
    }
}
