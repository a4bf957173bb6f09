//! The sandbox-private home: what a session may keep between sessions — shell and REPL
//! history, viminfo, less's history, tool caches — kept in sbx-shell's own state directory
//! (`$XDG_STATE_HOME/sbx-shell/home/PROFILE`), one per profile, never in the host's files.
//! The sandbox never reads the host's history and never writes the host's caches: a
//! poisoned cache or history file there would run outside later. Under bwrap the package
//! caches are layered: the host's read-only beneath the twin (`KeptEntry::layered`).
//!
//! Each kept path has a twin in that directory. Two ways get a program there, both planned
//! here, purely:
//! - the tools' own variables (`HISTFILE`, `XDG_CACHE_HOME`, `npm_config_cache` …), set in
//!   every backend (`variables`);
//! - under bwrap, for the history files (denied anyway) and what no variable reaches
//!   (cargo's registry), the twin mounted over the host's path when that exists
//!   (`bwrap::hides` plans it, the helper mounts it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where the private homes live, under sbx-shell's state directory.
pub const HOMES_DIR: &str = "home";

/// What a kept path is on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeptKind {
    File,
    Dir,
}

/// One kept path, relative to the home directory, and the variable that points a tool at
/// its twin (when the tool has one).
pub struct KeptEntry {
    pub path: &'static str,
    pub kind: KeptKind,
    pub variable: Option<&'static str>,
    /// Under bwrap, the twin is mounted over the host's path (where the host has it): the
    /// history files, which are denied anyway (the mount replaces the hide), and what no
    /// variable reaches. The rest are left to their variables: a mount per cache would cost
    /// start-up time for nothing the variables do not already do.
    pub mount: bool,
    /// Under bwrap, a cache the host has shows through, read-only, beneath the twin: an
    /// overlay whose upper layer is kept here (`Kept::layers`), so a build finds what the
    /// host downloaded and writes only the private copy.
    pub layered: bool,
    /// What it is, for `explain`.
    pub what: &'static str,
}

/// Where the layered caches' upper and work directories live, in the private home.
pub const LAYERS_DIR: &str = ".layers";

/// What a session keeps. `HISTFILE` is set for the shell that runs (`variables`).
pub const KEPT: &[KeptEntry] = &[
    KeptEntry {
        path: ".bash_history",
        kind: KeptKind::File,
        variable: None,
        mount: true,
        layered: false,
        what: "bash history (HISTFILE, when bash runs)",
    },
    KeptEntry {
        path: ".zsh_history",
        kind: KeptKind::File,
        variable: None,
        mount: true,
        layered: false,
        what: "zsh history (HISTFILE, when zsh runs)",
    },
    KeptEntry {
        path: ".python_history",
        kind: KeptKind::File,
        variable: Some("PYTHON_HISTORY"),
        mount: true,
        layered: false,
        what: "python's REPL history",
    },
    KeptEntry {
        path: ".node_repl_history",
        kind: KeptKind::File,
        variable: Some("NODE_REPL_HISTORY"),
        mount: true,
        layered: false,
        what: "node's REPL history",
    },
    KeptEntry {
        path: ".lesshst",
        kind: KeptKind::File,
        variable: Some("LESSHISTFILE"),
        mount: true,
        layered: false,
        what: "less's search history",
    },
    KeptEntry {
        path: ".viminfo",
        kind: KeptKind::File,
        variable: None,
        mount: false,
        layered: false,
        what: "vim's viminfo (VIMINIT sets viminfofile)",
    },
    KeptEntry {
        path: ".cache",
        kind: KeptKind::Dir,
        variable: Some("XDG_CACHE_HOME"),
        mount: false,
        layered: false,
        what: "caches (pip, go's build cache, agents' caches …)",
    },
    KeptEntry {
        path: ".npm",
        kind: KeptKind::Dir,
        variable: Some("npm_config_cache"),
        mount: false,
        layered: true,
        what: "npm's cache",
    },
    KeptEntry {
        path: ".cache/pip",
        kind: KeptKind::Dir,
        variable: Some("PIP_CACHE_DIR"),
        mount: false,
        layered: true,
        what: "pip's cache",
    },
    KeptEntry {
        path: ".cargo/registry",
        kind: KeptKind::Dir,
        variable: None,
        mount: true,
        layered: true,
        what: "cargo's registry (bwrap only: cargo has no variable for it alone)",
    },
    KeptEntry {
        path: ".cargo/git",
        kind: KeptKind::Dir,
        variable: None,
        mount: true,
        layered: true,
        what: "cargo's git checkouts (bwrap only)",
    },
    KeptEntry {
        path: "go/pkg/mod",
        kind: KeptKind::Dir,
        variable: Some("GOMODCACHE"),
        mount: false,
        layered: true,
        what: "go's module cache",
    },
];

/// The private home of one profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrivateHome {
    /// `STATE/home/PROFILE`.
    pub dir: PathBuf,
    pub kept: Vec<Kept>,
}

/// A kept path: the host's path (in the home directory) and its twin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub path: PathBuf,
    pub twin: PathBuf,
    pub kind: KeptKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variable: Option<&'static str>,
    /// Bound over the host's path under bwrap (`KeptEntry::mount`).
    pub mount: bool,
    /// The upper and work directories of its overlay over the host's cache
    /// (`KeptEntry::layered`), under `LAYERS_DIR`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<(PathBuf, PathBuf)>,
    pub what: &'static str,
}

/// The private home for `profile`, under the state directory `state`, for the home `home`
/// (its real path: mounts go there).
pub fn plan(state: &Path, profile: &str, home: &Path) -> PrivateHome {
    let dir = dir_of(state, profile);
    let kept = KEPT
        .iter()
        .map(|e| Kept {
            path: home.join(e.path),
            twin: dir.join(e.path),
            kind: e.kind,
            variable: e.variable,
            mount: e.mount,
            layers: e.layered.then(|| {
                let at = dir.join(LAYERS_DIR).join(e.path);
                (at.join("upper"), at.join("work"))
            }),
            what: e.what,
        })
        .collect();
    PrivateHome { dir, kept }
}

/// `STATE/home/PROFILE`; a profile given as a path is named by its file stem.
pub fn dir_of(state: &Path, profile: &str) -> PathBuf {
    let name = Path::new(profile)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty() && !s.starts_with('.'))
        .unwrap_or_else(|| "default".into());
    state.join(HOMES_DIR).join(name)
}

/// The variables that point tools at their twins, for a session whose shell is `shell`,
/// given the variables the host already sets (`VIMINIT` is the user's when set).
pub fn variables(
    home: &PrivateHome,
    shell: &Path,
    host_has: &dyn Fn(&str) -> bool,
) -> Vec<(String, OsString)> {
    let twin = |rel: &str| home.dir.join(rel).into_os_string();
    let history = match shell.file_name().and_then(|n| n.to_str()) {
        Some("zsh") => ".zsh_history",
        _ => ".bash_history",
    };
    let mut out = vec![("HISTFILE".to_string(), twin(history))];
    out.extend(home.kept.iter().filter_map(|k| {
        k.variable
            .map(|v| (v.to_string(), k.twin.clone().into_os_string()))
    }));
    if !host_has("VIMINIT") {
        out.push(("VIMINIT".into(), vim_init(&home.dir).into()));
    }
    // The host's own is never handed over (`ALWAYS_DROPPED`): this one takes its place.
    out.push(("PYTHONSTARTUP".into(), twin(PYTHON_STARTUP.0)));
    out
}

/// Python before 3.13 ignores `PYTHON_HISTORY` and keeps its REPL history in
/// `~/.python_history` only (denied): a startup file (`PYTHONSTARTUP`; the host's is
/// never handed over) that puts the same interactive hook as Python's own `site` in place, with the
/// history at `PYTHON_HISTORY`. From 3.13 on it does nothing; Python reads the variable
/// itself. Written by sbx-shell into the private home at every session's start (whatever
/// a session left there is replaced), run only inside the sandbox.
pub const PYTHON_STARTUP: (&str, &str) = (
    ".python_startup.py",
    r#"# sbx-shell: Python's REPL history at PYTHON_HISTORY before Python 3.13 (which reads that
# variable itself). Rewritten by sbx-shell at every session's start.
import sys
if sys.version_info < (3, 13) and hasattr(sys, "__interactivehook__"):
    def _sbx_shell_interactive_hook():
        import atexit
        import os
        try:
            import readline
            import rlcompleter  # noqa: F401 (tab completion, as site sets it up)
        except ImportError:
            return
        doc = getattr(readline, "__doc__", "") or ""
        readline.parse_and_bind("bind ^I rl_complete" if "libedit" in doc else "tab: complete")
        try:
            readline.read_init_file()
        except OSError:
            pass
        if readline.get_current_history_length() != 0:
            return
        path = os.environ.get("PYTHON_HISTORY") or os.path.expanduser("~/.python_history")
        try:
            readline.read_history_file(path)
        except OSError:
            pass

        def write_history():
            try:
                readline.write_history_file(path)
            except OSError:
                pass

        atexit.register(write_history)

    sys.__interactivehook__ = _sbx_shell_interactive_hook
    del _sbx_shell_interactive_hook
del sys
"#,
);

/// vim's backup and swap directories in the private home (made by sbx-shell at start).
pub const VIM_DIRS: [&str; 2] = [".vim-backup", ".vim-swap"];

/// `VIMINIT` that keeps viminfo in the twin and otherwise starts vim as it would start
/// without it: a set `VIMINIT` replaces the user's vimrc (and `defaults.vim`), and
/// Neovim's `init.lua`/`init.vim`, so it loads the first that exists, as vim would.
/// (vim writes viminfo through a temporary file beside it and a rename, so binding a file
/// over `~/.viminfo` cannot work.) Backup and swap files go to the private home first
/// (`VIM_DIRS`): beside a file at the top of a sealed home nothing can be created, and
/// vim would refuse to write the file without its backup (E510).
pub fn vim_init(dir: &Path) -> String {
    let escape = |p: &Path| {
        p.display()
            .to_string()
            .replace('\\', "\\\\")
            .replace(' ', "\\ ")
            .replace('|', "\\|")
            .replace(',', "\\\\,")
    };
    let file = escape(&dir.join(".viminfo"));
    let dirs = format!(
        "set backupdir^={}// directory^={}//",
        escape(&dir.join(VIM_DIRS[0])),
        escape(&dir.join(VIM_DIRS[1]))
    );
    [
        &dirs,
        "if has('nvim')",
        "if filereadable(stdpath('config').'/init.lua') | exe 'luafile' stdpath('config').'/init.lua'",
        "elseif filereadable(stdpath('config').'/init.vim') | exe 'source' stdpath('config').'/init.vim'",
        "endif",
        "else",
        &format!("set viminfofile={file}"),
        "if filereadable(expand('~/.vimrc')) | source ~/.vimrc",
        "elseif filereadable(expand('~/.vim/vimrc')) | source ~/.vim/vimrc",
        "elseif filereadable(expand('~/.config/vim/vimrc')) | source ~/.config/vim/vimrc",
        "else | runtime defaults.vim",
        "endif",
        "endif",
    ]
    .join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_profile_keeps_its_own_home_in_the_state_directory() {
        let home = plan(Path::new("/s/sbx-shell"), "claude", Path::new("/home/u"));
        assert_eq!(home.dir, Path::new("/s/sbx-shell/home/claude"));
        let cache = home
            .kept
            .iter()
            .find(|k| k.path.ends_with(".cache"))
            .unwrap();
        assert_eq!(cache.path, Path::new("/home/u/.cache"));
        assert_eq!(cache.twin, Path::new("/s/sbx-shell/home/claude/.cache"));
        assert_eq!(cache.kind, KeptKind::Dir);
        // A profile named by its path is kept under its file's name.
        assert_eq!(
            dir_of(Path::new("/s"), "/etc/x/mine.json"),
            Path::new("/s/home/mine")
        );
        assert_eq!(dir_of(Path::new("/s"), ".."), Path::new("/s/home/default"));
    }

    #[test]
    fn variables_point_at_the_twins_and_histfile_follows_the_shell() {
        let home = plan(Path::new("/s"), "shell", Path::new("/home/u"));
        let vars = variables(&home, Path::new("/bin/bash"), &|_| false);
        let get = |n: &str| {
            vars.iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(get("HISTFILE").unwrap(), "/s/home/shell/.bash_history");
        assert_eq!(get("XDG_CACHE_HOME").unwrap(), "/s/home/shell/.cache");
        assert_eq!(get("npm_config_cache").unwrap(), "/s/home/shell/.npm");
        assert_eq!(get("PIP_CACHE_DIR").unwrap(), "/s/home/shell/.cache/pip");
        assert_eq!(get("GOMODCACHE").unwrap(), "/s/home/shell/go/pkg/mod");
        assert_eq!(get("LESSHISTFILE").unwrap(), "/s/home/shell/.lesshst");
        assert!(get("VIMINIT")
            .unwrap()
            .contains("set viminfofile=/s/home/shell/.viminfo |"));
        let zsh = variables(&home, Path::new("/usr/bin/zsh"), &|_| false);
        assert!(zsh.contains(&("HISTFILE".into(), "/s/home/shell/.zsh_history".into())));
        // The user's own VIMINIT is left alone.
        let mine = variables(&home, Path::new("/bin/bash"), &|n| n == "VIMINIT");
        assert!(!mine.iter().any(|(k, _)| k == "VIMINIT"));
    }

    #[test]
    fn vim_init_escapes_the_file_name() {
        let init = vim_init(Path::new("/a b/x|y"));
        assert!(
            init.contains("set viminfofile=/a\\ b/x\\|y/.viminfo |"),
            "{init}"
        );
        assert!(
            init.starts_with(
                "set backupdir^=/a\\ b/x\\|y/.vim-backup// directory^=/a\\ b/x\\|y/.vim-swap// |"
            ),
            "{init}"
        );
    }
}
