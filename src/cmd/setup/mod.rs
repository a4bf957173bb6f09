//! `sbx-shell setup [--check] [--yes]`: show what this machine lacks, install it with the
//! user's consent (through sudo when not root), then run `doctor` again.

pub mod system;

use crate::cmd::messages;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

use crate::cmd::doctor::checks;
use crate::cmd::inputs;
use crate::host::{self, Machine, Probes};
use crate::sys::exit::{self, Failure};
use system::SetupStep;

const SUDO: &str = "/usr/bin/sudo";
const INSTALL: &str = "/usr/bin/install";
const APPARMOR_PARSERS: [&str; 2] = ["/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"];

pub fn main(check: bool, yes: bool) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let cache = host::probe_cache(&home);
    let machine = Machine::measure(Probes::Fresh(Some(&cache)));
    let plan = system::plan(&machine, &|p: &Path| p.exists());
    if plan.steps.is_empty() && plan.cannot.is_empty() {
        crate::sys::say::write_stdout(
            b"sbx-shell setup: nothing to install: this machine runs every layer.\n",
        )?;
        return Ok(0);
    }
    let mut report = String::new();
    for step in &plan.steps {
        let verb = if check { "would" } else { "will" };
        report.push_str(&format!("{verb} {}\n", step.describe()));
    }
    for cannot in &plan.cannot {
        report.push_str(&format!("setup cannot change this: {cannot}\n"));
    }
    crate::sys::say::write_stdout(report.as_bytes())?;
    if check || plan.steps.is_empty() {
        return Ok(exit::FAILURE);
    }
    if !yes && !consent("setup")? {
        crate::sys::say::write_stdout(b"nothing changed\n")?;
        return Ok(exit::FAILURE);
    }
    for step in &plan.steps {
        apply(step, &crate::sys::files::state_dir(&home), machine.root)?;
    }
    let report = checks::evaluate(&Machine::measure(Probes::Fresh(Some(&cache))));
    crate::sys::say::write_stdout(format!("\n{}", checks::render_text(&report)).as_bytes())?;
    Ok(if report.default_backend_can_run {
        0
    } else {
        exit::FAILURE
    })
}

/// Ask on the terminal; no terminal, no consent.
pub(super) fn consent(command: &str) -> Result<bool, Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(messages::consent_needs_terminal(command).into());
    }
    eprint!("Proceed? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

fn apply(step: &SetupStep, state_dir: &Path, root: bool) -> Result<(), Failure> {
    match step {
        SetupStep::InstallBubblewrap { argv } => as_root(argv, root, "setup"),
        SetupStep::AppArmorProfile { path, text } => {
            let staged = state_dir.join("sbx-shell-bwrap.apparmor");
            crate::sys::files::write_private(&staged, text.as_bytes())
                .with_context(|| format!("cannot write {}", staged.display()))?;
            let parser = APPARMOR_PARSERS
                .iter()
                .find(|p| Path::new(p).is_file())
                .ok_or_else(messages::no_apparmor_parser)?;
            let show = |p: &Path| p.display().to_string();
            as_root(
                &[
                    INSTALL.into(),
                    "-m".into(),
                    "0644".into(),
                    show(&staged),
                    show(path),
                ],
                root,
                "setup",
            )?;
            let _ = std::fs::remove_file(&staged);
            as_root(
                &[parser.to_string(), "-r".into(), show(path)],
                root,
                "setup",
            )
        }
    }
}

/// Run `argv` as root: directly when we are, else through sudo (at its fixed path).
pub(super) fn as_root(argv: &[String], root: bool, command: &str) -> Result<(), Failure> {
    let mut full: Vec<&str> = Vec::new();
    if !root {
        if !Path::new(SUDO).is_file() {
            return Err(messages::no_sudo(SUDO, command).into());
        }
        full.push(SUDO);
    }
    full.extend(argv.iter().map(String::as_str));
    eprintln!("sbx-shell {command}: running: {}", full.join(" "));
    let status = Command::new(full[0])
        .args(&full[1..])
        .status()
        .with_context(|| format!("cannot run {}", full[0]))?;
    if !status.success() {
        return Err(messages::root_step_failed(&full.join(" "), status, command).into());
    }
    Ok(())
}
