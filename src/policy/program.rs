//! Finding programs on this machine: the program to run (on `PATH`, executable), the real
//! shell's candidates from the passwd entry, and the install hints for the agents people run
//! under sbx-shell. `find_in_path` and `install_hint` are pure; `System` is the real
//! machine behind `shell::ShellProbe`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::policy::shell::ShellProbe;
use crate::sys::exit::{self, Failure};

/// Fail early, before the terminal is touched, when the program cannot be found or run.
pub fn check(program: &OsStr, system: &System) -> Result<(), Failure> {
    let path = Path::new(program);
    let found = if program.as_bytes().contains(&b'/') {
        path.exists().then(|| path.to_path_buf())
    } else {
        find_in_path(path, std::env::var_os("PATH").as_deref(), |p| {
            system.is_file(p)
        })
    };
    let shown = program.to_string_lossy();
    match found {
        None => Err(Failure {
            code: exit::NOT_FOUND,
            error: not_found(&shown, install_hint(&shown)),
        }),
        Some(p) if !system.is_executable(&p) => Err(Failure {
            code: exit::NOT_RUNNABLE,
            error: not_executable(&p),
        }),
        Some(_) => Ok(()),
    }
}

/// The program is not found (`install`: how to install it, where known).
fn not_found(shown: &str, install: Option<&str>) -> anyhow::Error {
    anyhow!(crate::sys::say::hinted(
        format_args!("command not found: {shown}"),
        install.map_or_else(
            || "check the spelling, install it, or give its full path".to_string(),
            |install| format!("{install}, then check that it is on PATH"),
        )
    ))
}

/// The program's file may not be run.
fn not_executable(path: &Path) -> anyhow::Error {
    anyhow!(crate::sys::say::hinted(
        format_args!("not an executable file: {}", path.display()),
        "check its permissions (chmod +x) or run it through an interpreter"
    ))
}

/// The first `dir/program` in a `PATH`-style list that `exists` says is there; empty entries
/// mean the current directory, as execvp treats them.
pub fn find_in_path(
    program: &Path,
    path_var: Option<&OsStr>,
    exists: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let path_var = path_var.unwrap_or(OsStr::new("/usr/local/bin:/usr/bin:/bin"));
    path_var
        .as_bytes()
        .split(|b| *b == b':')
        .map(|dir| {
            if dir.is_empty() {
                Path::new(".")
            } else {
                Path::new(OsStr::from_bytes(dir))
            }
        })
        .map(|dir| dir.join(program))
        .find(|candidate| exists(candidate))
}

/// The directories `program`'s tools run from, as real paths: each absolute directory of
/// `path_var` (the child's `PATH`) and the one `program` itself is in (symlinks followed:
/// `node_modules/.bin/x` names a file in its package). For Landlock alone, whose reads are
/// an allow-list (`sandbox::landlock::tool_prefixes`).
pub fn tool_dirs(path_var: Option<&OsStr>, program: &OsStr) -> Vec<PathBuf> {
    let found = if program.as_bytes().contains(&b'/') {
        Some(PathBuf::from(program))
    } else {
        find_in_path(Path::new(program), path_var, Path::is_file)
    };
    let own = found
        .and_then(|p| std::fs::canonicalize(p).ok())
        .and_then(|p| p.parent().map(Path::to_path_buf));
    path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|d| d.is_absolute())
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .chain(own)
        .collect()
}

/// How to install the agents people run under sbx-shell, for a "not found" error.
pub fn install_hint(program: &str) -> Option<&'static str> {
    match program {
        "claude" => Some("install Claude Code: npm install -g @anthropic-ai/claude-code"),
        "gemini" => Some("install Gemini CLI: npm install -g @google/gemini-cli"),
        "codex" => Some("install Codex CLI: npm install -g @openai/codex"),
        "opencode" => Some("install opencode: npm install -g opencode-ai"),
        _ => None,
    }
}

/// The login shell in the passwd entry of the real user.
pub fn passwd_shell() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.shell)
}

/// The real machine behind `shell::ShellProbe`.
pub struct System {
    /// This executable, to recognise sbx-shell under another name.
    pub me: Option<PathBuf>,
}

impl Default for System {
    fn default() -> System {
        System {
            me: std::env::current_exe().ok(),
        }
    }
}

impl System {
    fn is_file(&self, path: &Path) -> bool {
        path.metadata().is_ok_and(|m| m.is_file())
    }
}

impl ShellProbe for System {
    fn is_self(&self, path: &Path) -> bool {
        if path.file_name().is_some_and(|n| n == "sbx-shell") {
            return true;
        }
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        match (&self.me, canonical(path)) {
            (Some(me), Some(candidate)) => canonical(me).is_some_and(|me| me == candidate),
            _ => false,
        }
    }

    fn is_executable(&self, path: &Path) -> bool {
        self.is_file(path) && nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_lookup_takes_the_first_match_and_treats_empty_as_cwd() {
        let there = |p: &Path| p == Path::new("/b/vim") || p == Path::new("./vim");
        let found = find_in_path(Path::new("vim"), Some(OsStr::new("/a:/b:/c")), there);
        assert_eq!(found, Some(PathBuf::from("/b/vim")));
        let found = find_in_path(Path::new("vim"), Some(OsStr::new("/a::/c")), there);
        assert_eq!(found, Some(PathBuf::from("./vim")));
        assert_eq!(
            find_in_path(Path::new("nvim"), Some(OsStr::new("/a:/b")), there),
            None
        );
    }
}
