//! Which real shell to run: `--shell`, else the user config's `"shell"`, else `$SHELL`, else
//! the passwd entry, else /bin/sh.
//!
//! When sbx-shell is someone's login shell, `$SHELL` and the passwd entry both name
//! sbx-shell itself; those candidates are skipped so that it never recurses into itself and
//! never leaves a login user without a shell. The choice is a pure function of the candidates
//! and two predicates, so it is tested without touching the machine.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The last resort: every POSIX system has it.
pub const FALLBACK_SHELL: &str = "/bin/sh";

/// Where the shell may come from, highest precedence first.
#[derive(Debug, Default, Clone)]
pub struct Candidates {
    /// `--shell PATH`: the user's explicit choice, an error when unusable.
    pub explicit: Option<PathBuf>,
    /// `"shell"` in the user config; skipped when unusable, like the ones below, so that a
    /// stale config never leaves a login user without a shell.
    pub configured: Option<PathBuf>,
    /// `$SHELL`.
    pub env: Option<OsString>,
    /// The login shell in the passwd entry.
    pub passwd: Option<PathBuf>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ShellError {
    #[error("--shell {0}: that is sbx-shell itself, which would run itself forever\nHint: name the real shell, e.g. --shell /bin/bash")]
    ExplicitIsSelf(PathBuf),
    #[error("--shell {0}: not an executable file\nHint: give the full path of an installed shell, e.g. --shell /bin/bash (see /etc/shells)")]
    ExplicitNotExecutable(PathBuf),
}

/// What the machine says about a candidate path.
pub trait ShellProbe {
    /// The path is sbx-shell (this binary, or any file named sbx-shell).
    fn is_self(&self, path: &Path) -> bool;
    /// The path is an executable regular file.
    fn is_executable(&self, path: &Path) -> bool;
}

/// Pick the shell. Only an explicit `--shell` can fail; the others are skipped when unusable.
pub fn resolve(candidates: &Candidates, probe: &impl ShellProbe) -> Result<PathBuf, ShellError> {
    if let Some(explicit) = &candidates.explicit {
        if probe.is_self(explicit) {
            return Err(ShellError::ExplicitIsSelf(explicit.clone()));
        }
        if !probe.is_executable(explicit) {
            return Err(ShellError::ExplicitNotExecutable(explicit.clone()));
        }
        return Ok(explicit.clone());
    }
    let implicit = [
        candidates.configured.clone(),
        candidates.env.as_ref().map(PathBuf::from),
        candidates.passwd.clone(),
    ];
    let usable = implicit
        .into_iter()
        .flatten()
        .find(|path| path.is_absolute() && !probe.is_self(path) && probe.is_executable(path));
    Ok(usable.unwrap_or_else(|| PathBuf::from(FALLBACK_SHELL)))
}

/// Whether `chosen` is the last resort although no candidate named it: the user gets
/// /bin/sh without having asked for it, and should hear why.
pub fn fell_back(candidates: &Candidates, chosen: &Path) -> bool {
    let fallback = Path::new(FALLBACK_SHELL);
    let named = candidates.explicit.as_deref() == Some(fallback)
        || candidates.configured.as_deref() == Some(fallback)
        || candidates.env.as_deref() == Some(fallback.as_os_str())
        || candidates.passwd.as_deref() == Some(fallback);
    chosen == fallback && !named
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        executables: Vec<&'static str>,
        me: &'static str,
    }

    impl ShellProbe for Fake {
        fn is_self(&self, path: &Path) -> bool {
            path == Path::new(self.me)
        }
        fn is_executable(&self, path: &Path) -> bool {
            self.executables.iter().any(|e| Path::new(e) == path)
        }
    }

    fn fake() -> Fake {
        Fake {
            executables: vec!["/bin/bash", "/bin/zsh", "/opt/sbx-shell"],
            me: "/opt/sbx-shell",
        }
    }

    fn cands(explicit: Option<&str>, env: Option<&str>, passwd: Option<&str>) -> Candidates {
        Candidates {
            explicit: explicit.map(PathBuf::from),
            configured: None,
            env: env.map(OsString::from),
            passwd: passwd.map(PathBuf::from),
        }
    }

    #[test]
    fn precedence_is_explicit_then_env_then_passwd_then_bin_sh() {
        let f = fake();
        let pick = |c| resolve(&c, &f).unwrap();
        assert_eq!(
            pick(cands(Some("/bin/zsh"), Some("/bin/bash"), None)),
            Path::new("/bin/zsh")
        );
        assert_eq!(
            pick(cands(None, Some("/bin/bash"), Some("/bin/zsh"))),
            Path::new("/bin/bash")
        );
        assert_eq!(
            pick(cands(None, None, Some("/bin/zsh"))),
            Path::new("/bin/zsh")
        );
        assert_eq!(pick(cands(None, None, None)), Path::new(FALLBACK_SHELL));
    }

    #[test]
    fn the_configured_shell_comes_after_the_flag_and_before_env() {
        let f = fake();
        let mut c = cands(None, Some("/bin/bash"), None);
        c.configured = Some("/bin/zsh".into());
        assert_eq!(resolve(&c, &f).unwrap(), Path::new("/bin/zsh"));
        c.configured = Some("/gone/fish".into());
        assert_eq!(resolve(&c, &f).unwrap(), Path::new("/bin/bash"));
    }

    #[test]
    fn sbx_shell_itself_is_skipped_as_a_login_user_has_it() {
        let f = fake();
        let c = cands(None, Some("/opt/sbx-shell"), Some("/opt/sbx-shell"));
        assert_eq!(resolve(&c, &f).unwrap(), Path::new(FALLBACK_SHELL));
        let c = cands(None, Some("/opt/sbx-shell"), Some("/bin/zsh"));
        assert_eq!(resolve(&c, &f).unwrap(), Path::new("/bin/zsh"));
    }

    #[test]
    fn unusable_implicit_candidates_are_skipped() {
        let f = fake();
        let c = cands(None, Some("/nonexistent/fish"), Some("bash"));
        assert_eq!(resolve(&c, &f).unwrap(), Path::new(FALLBACK_SHELL));
    }

    #[test]
    fn an_unusable_explicit_shell_is_an_error_with_a_hint() {
        let f = fake();
        let err = resolve(&cands(Some("/opt/sbx-shell"), None, None), &f).unwrap_err();
        assert_eq!(err, ShellError::ExplicitIsSelf("/opt/sbx-shell".into()));
        let err = resolve(&cands(Some("/bin/nosuch"), Some("/bin/bash"), None), &f).unwrap_err();
        assert!(err.to_string().contains("Hint: "));
    }

    #[test]
    fn falling_back_is_noticed_only_when_nobody_named_the_fallback() {
        let me = Candidates {
            env: Some("/usr/local/bin/sbx-shell".into()),
            passwd: Some("/usr/local/bin/sbx-shell".into()),
            ..Candidates::default()
        };
        assert!(fell_back(&me, Path::new(FALLBACK_SHELL)));
        let asked = Candidates {
            passwd: Some(FALLBACK_SHELL.into()),
            ..me.clone()
        };
        assert!(!fell_back(&asked, Path::new(FALLBACK_SHELL)));
        assert!(!fell_back(&me, Path::new("/bin/bash")));
    }
}
