//! `sbx-shell why PATH|HOST|VARIABLE|SOCKET`: for the policy a run here would use (the same
//! flags), whether the sandbox allows it, the rule that decides it, where the rule comes
//! from, and the option that changes it (`judge`). `--json` for tools.

mod judge;

use std::path::Path;

use crate::cli::{WhyArgs, WhyKind};
use crate::cmd::inputs;
use crate::policy::{profiles, Layer, Policy};
use crate::sys::exit::Failure;

pub fn main(args: &WhyArgs) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let user_config = profiles::load_user_config(&inputs::config_dir(&home))?;
    let program = args.command.first().map(|c| c.as_os_str());
    let (policy_args, _) = inputs::with_agent_profile(&args.policy, program);
    let (policy, layers, ctx) = inputs::resolve_with_layers(&policy_args, &home, user_config)?;
    let fs = crate::host::RealFs::default();
    let resolve =
        |raw: &str, origin: &str| crate::policy::resolve_path(raw, origin, &ctx, &fs).ok();
    let kind = args.what.unwrap_or_else(|| kind_of(&args.subject));
    let as_path = || {
        crate::policy::resolve_path(&args.subject, "why", &ctx, &fs)
            .map(|p| p.real().to_path_buf())
            .unwrap_or_else(|_| std::path::absolute(&args.subject).unwrap_or_default())
    };
    let mut answer = match kind {
        WhyKind::Path => {
            let at = as_path();
            judge::path(&policy, &layers, &resolve, &at, at.is_dir())
        }
        WhyKind::Socket => judge::socket(&policy, &layers, &resolve, &as_path()),
        WhyKind::Host => judge::host(&policy, &layers, &args.subject),
        WhyKind::Variable => {
            let inherited: Vec<_> = std::env::vars_os().collect();
            let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from);
            let sockets =
                crate::host::sockets::variable_check(&policy, runtime.as_deref(), &inherited, true);
            let value = std::env::var_os(&args.subject);
            judge::variable(&policy, &layers, &args.subject, value.as_deref(), &sockets)
        }
    };
    if let Some(source) = answer.source.as_mut() {
        source.line = line_in(&layers, source);
    }
    let text = match args.json {
        true => format!("{}\n", serde_json::to_string_pretty(&answer)?),
        false => render(&answer, &policy),
    };
    crate::sys::say::write_stdout(text.as_bytes())?;
    Ok(if answer.allowed { 0 } else { 1 })
}

/// What the subject names when `--as` does not say: a path when it looks like one (a
/// socket when it is one), a variable when it is spelled like one, else a host.
fn kind_of(subject: &str) -> WhyKind {
    use std::os::unix::fs::FileTypeExt;
    let path_like = subject.starts_with(['/', '.', '~']) || subject.contains('/');
    if path_like {
        let expanded = match subject.strip_prefix("~/") {
            Some(rest) => inputs::home_dir().map(|h| h.join(rest)).unwrap_or_default(),
            None => subject.into(),
        };
        return match std::fs::metadata(expanded) {
            Ok(m) if m.file_type().is_socket() => WhyKind::Socket,
            _ => WhyKind::Path,
        };
    }
    let variable = subject
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && subject
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if variable {
        WhyKind::Variable
    } else {
        WhyKind::Host
    }
}

/// The line of the rule's entry in its layer's text: the config file, or the shipped
/// profile.
fn line_in(layers: &[Layer], source: &judge::Source) -> Option<usize> {
    let layer = layers.iter().find(|l| l.origin == source.origin)?;
    let text = match layer.origin.strip_prefix("profile ") {
        Some(name) => profiles::shipped_text(name)?.to_string(),
        None if Path::new(&layer.origin).is_absolute() => {
            std::fs::read_to_string(&layer.origin).ok()?
        }
        None => return None,
    };
    judge::line_of(&text, &source.entry)
}

fn render(a: &judge::WhyAnswer, policy: &Policy) -> String {
    let verdict = match (a.read, a.write) {
        (Some(true), Some(true)) => "readable and writable",
        (Some(true), Some(false)) => "readable, not writable",
        (Some(false), _) => "neither readable nor writable",
        _ if a.allowed => "allowed",
        _ => "refused",
    };
    let mut out = format!(
        "{} ({}): {verdict}\n  rule: {}\n",
        a.subject, a.what, a.rule
    );
    if let Some(s) = &a.source {
        let place = match (s.line, s.origin.as_str()) {
            (Some(line), origin) => format!("{origin}, line {line}"),
            (None, origin) => origin.to_string(),
        };
        let entry = match s.entry == place || s.origin == "built-in defaults" {
            true => s.entry.clone(),
            false => format!("\"{}\"", s.entry),
        };
        out.push_str(&format!("  from: {entry} ({place})\n"));
    }
    if let Some(fix) = &a.fix {
        out.push_str(&format!("  to change it: {fix}\n"));
    }
    out.push_str(&format!("  profile: {}\n", policy.profile));
    out
}
