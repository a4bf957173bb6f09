//! What sbx-shell itself says on stderr, in one place: errors and warnings (always), notes
//! (unless `--quiet`) and details (with `--verbose`). Color only when stderr is a terminal,
//! `NO_COLOR` is unset or empty, and `TERM` is not `dumb`.

use std::ffi::OsStr;
use std::io::IsTerminal;

/// How much the user asked to hear.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verbosity {
    pub quiet: bool,
    pub verbose: bool,
}

impl Verbosity {
    /// Something worth knowing (the network summary): silenced by `--quiet`.
    pub fn note(&self, text: &str) {
        if !self.quiet {
            eprintln!("{}", paint_prefix(text, "sbx-shell:", BOLD, colored()));
        }
    }

    /// What sbx-shell decided (profile, backend, proxy): only with `--verbose`.
    /// Said even with `--quiet` (the one line it keeps of the end summary).
    /// A terminal that went away (a hangup) loses it, nothing else.
    pub fn always(&self, text: &str) {
        use std::io::Write;
        let line = paint_prefix(text, "sbx-shell:", BOLD, colored());
        let _ = writeln!(std::io::stderr(), "{line}");
    }

    pub fn detail(&self, text: &str) {
        if self.verbose {
            eprintln!("{}", paint_prefix(text, "sbx-shell:", BOLD, colored()));
        }
    }
}

/// A problem the user can fix, shaped as every error with a remedy is: the problem, then
/// on its own line `Hint: ` and the exact action (highlighted when printed, `format_error`).
pub fn hinted(problem: impl std::fmt::Display, hint: impl std::fmt::Display) -> String {
    format!("{problem}\n{}", hint_line(hint))
}

/// The hint's line alone, for a problem another said (clap's usage errors).
pub fn hint_line(hint: impl std::fmt::Display) -> String {
    format!("Hint: {hint}")
}

/// A note about something the user can fix, on one line: the problem, then `Fix: ` and the
/// exact action.
pub fn with_fix(problem: impl std::fmt::Display, fix: impl std::fmt::Display) -> String {
    format!("{problem}. Fix: {fix}")
}

/// `PATH`, or `PATH and N more`, for a line that names a list of paths; `None` for none.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub fn first_and_more(paths: &[std::path::PathBuf]) -> Option<String> {
    let first = paths.first()?.display();
    Some(match paths.len() {
        1 => first.to_string(),
        n => format!("{first} and {} more", n - 1),
    })
}

/// An error: "sbx-shell: error: …", its `Hint:` lines highlighted.
pub fn error(text: &str) {
    eprintln!("{}", format_error(text, colored()));
}

/// A warning that nothing silences (e.g. running without a sandbox).
pub fn warning(text: &str) {
    let on = colored();
    eprintln!(
        "{} {}",
        paint("sbx-shell: warning:", YELLOW, on),
        hints(text, on)
    );
}

const RED: &str = "\x1b[1;31m";
const YELLOW: &str = "\x1b[1;33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// The error line as printed.
pub fn format_error(text: &str, color: bool) -> String {
    format!(
        "{} {}",
        paint("sbx-shell: error:", RED, color),
        hints(text, color)
    )
}

fn hints(text: &str, color: bool) -> String {
    if color {
        text.replace("\nHint:", &format!("\n{BOLD}Hint:{RESET}"))
    } else {
        text.to_string()
    }
}

fn paint(text: &str, style: &str, color: bool) -> String {
    if color {
        format!("{style}{text}{RESET}")
    } else {
        text.to_string()
    }
}

fn paint_prefix(text: &str, prefix: &str, style: &str, color: bool) -> String {
    match text.strip_prefix(prefix) {
        Some(rest) if color => format!("{style}{prefix}{RESET}{rest}"),
        _ => text.to_string(),
    }
}

fn colored() -> bool {
    use_color(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    )
}

/// Color on a terminal, unless NO_COLOR is set to anything non-empty (no-color.org) or the
/// terminal is dumb.
pub fn use_color(stderr_tty: bool, no_color: Option<&OsStr>, term: Option<&OsStr>) -> bool {
    stderr_tty && no_color.is_none_or(|v| v.is_empty()) && term.is_none_or(|t| t != "dumb")
}

/// Write `bytes` to stdout; a reader that went away early (`| head`) is not an error.
pub fn write_stdout(bytes: &[u8]) -> Result<u8, crate::sys::exit::Failure> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to stdout: {e}").into())
        }
        _ => Ok(0),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_list_of_paths_is_named_by_its_first_and_a_count() {
        let paths: Vec<std::path::PathBuf> = vec!["/a".into(), "/b".into(), "/c".into()];
        assert_eq!(first_and_more(&paths).as_deref(), Some("/a and 2 more"));
        assert_eq!(first_and_more(&paths[..1]).as_deref(), Some("/a"));
        assert_eq!(first_and_more(&[]), None);
    }

    use super::*;

    #[test]
    fn color_only_on_a_terminal_without_no_color() {
        let os = |s: &'static str| Some(OsStr::new(s));
        assert!(use_color(true, None, os("xterm-256color")));
        assert!(use_color(true, os(""), None));
        assert!(!use_color(false, None, os("xterm")));
        assert!(!use_color(true, os("1"), os("xterm")));
        assert!(!use_color(true, None, os("dumb")));
    }

    #[test]
    fn errors_are_plain_without_color_and_highlighted_with_it() {
        let text = "no such file\nHint: create it";
        assert_eq!(
            format_error(text, false),
            "sbx-shell: error: no such file\nHint: create it"
        );
        assert_eq!(
            format_error(text, true),
            "\x1b[1;31msbx-shell: error:\x1b[0m no such file\n\x1b[1mHint:\x1b[0m create it"
        );
    }
}
