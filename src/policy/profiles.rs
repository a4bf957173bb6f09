//! Profiles: the shipped ones (data files in `profiles/`, compiled in) and the user's own
//! (`$XDG_CONFIG_HOME/sbx-shell/profiles/NAME.json`), plus the user config file. A config
//! file inside the workspace is never read implicitly: an agent could have written it.

use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::policy::config::{self, ConfigError};
use crate::policy::Layer;

/// The user's config file, in `config_dir`.
pub const CONFIG_FILE: &str = "config.json";

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "shell";

/// Every shipped profile: name and JSON text.
pub const SHIPPED: &[(&str, &str)] = &[
    ("shell", include_str!("../../profiles/shell.json")),
    ("read-only", include_str!("../../profiles/read-only.json")),
    ("claude", include_str!("../../profiles/claude.json")),
    ("gemini", include_str!("../../profiles/gemini.json")),
    ("codex", include_str!("../../profiles/codex.json")),
    ("opencode", include_str!("../../profiles/opencode.json")),
];

/// The shipped profiles made for one program each, picked when that program is the command
/// and no profile is named.
pub const AGENTS: &[&str] = &["claude", "gemini", "codex", "opencode"];

/// The agent profile for `program` (matched by its file name), if there is one.
pub fn for_program(program: &std::ffi::OsStr) -> Option<&'static str> {
    let name = Path::new(program).file_name()?;
    AGENTS.iter().copied().find(|agent| name == *agent)
}

#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("no profile named {name:?}\nHint: use one of {known}, a file of your own in {dir}, or a path to a JSON file")]
    Unknown {
        name: String,
        known: String,
        dir: String,
    },
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Where sbx-shell's own configuration lives: `$XDG_CONFIG_HOME/sbx-shell`, else
/// `~/.config/sbx-shell`.
pub fn config_dir(xdg_config_home: Option<&Path>, home: &Path) -> PathBuf {
    match xdg_config_home.filter(|p| p.is_absolute()) {
        Some(xdg) => xdg.join("sbx-shell"),
        None => home.join(".config/sbx-shell"),
    }
}

/// The user's config file, if there is one.
pub fn load_user_config(dir: &Path) -> Result<Option<Layer>, ConfigError> {
    let path = dir.join(CONFIG_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let config = config::load(&path)?;
    Ok(Some(Layer {
        origin: path.display().to_string(),
        config,
    }))
}

/// The text of a shipped profile.
pub fn shipped_text(name: &str) -> Option<&'static str> {
    SHIPPED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

/// A profile by shipped name, user profile name, or path (anything with a '/' or ending in
/// `.json`). Returns its display name and its layer.
pub fn load(name_or_path: &str, dir: &Path) -> Result<(String, Layer), ProfileError> {
    if name_or_path.contains('/') || name_or_path.ends_with(".json") {
        let path = Path::new(name_or_path);
        let config = config::load(path)?;
        return Ok((
            name_or_path.to_string(),
            Layer {
                origin: path.display().to_string(),
                config,
            },
        ));
    }
    if let Some((name, text)) = SHIPPED.iter().find(|(name, _)| *name == name_or_path) {
        let origin = format!("profile {name}");
        let config = config::from_str(text, &origin)?;
        return Ok((name.to_string(), Layer { origin, config }));
    }
    let path = dir.join("profiles").join(format!("{name_or_path}.json"));
    if path.exists() {
        let config = config::load(&path)?;
        return Ok((
            name_or_path.to_string(),
            Layer {
                origin: path.display().to_string(),
                config,
            },
        ));
    }
    Err(ProfileError::Unknown {
        name: name_or_path.to_string(),
        known: SHIPPED
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", "),
        dir: dir.join("profiles").display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_get_their_profile_by_the_program_name() {
        use std::ffi::OsStr;
        assert_eq!(for_program(OsStr::new("claude")), Some("claude"));
        assert_eq!(
            for_program(OsStr::new("/usr/local/bin/codex")),
            Some("codex")
        );
        assert_eq!(for_program(OsStr::new("vim")), None);
        assert_eq!(for_program(OsStr::new("claude-wrapper")), None);
        for agent in AGENTS {
            assert!(SHIPPED.iter().any(|(name, _)| name == agent), "{agent}");
        }
    }

    #[test]
    fn every_shipped_profile_loads() {
        for (name, _) in SHIPPED {
            let (shown, layer) = load(name, Path::new("/nonexistent")).unwrap();
            assert_eq!(shown, *name);
            assert!(
                layer.config.description.is_some(),
                "{name} says what it is for"
            );
        }
    }

    #[test]
    fn an_unknown_profile_names_the_known_ones() {
        let err = load("clade", Path::new("/cfg")).unwrap_err().to_string();
        assert!(
            err.contains("\"clade\"") && err.contains("claude") && err.contains("/cfg/profiles"),
            "{err}"
        );
        assert!(err.contains("Hint: "));
    }

    #[test]
    fn the_config_dir_follows_xdg() {
        assert_eq!(
            config_dir(Some(Path::new("/x")), Path::new("/h")),
            Path::new("/x/sbx-shell")
        );
        assert_eq!(
            config_dir(Some(Path::new("rel")), Path::new("/h")),
            Path::new("/h/.config/sbx-shell")
        );
        assert_eq!(
            config_dir(None, Path::new("/h")),
            Path::new("/h/.config/sbx-shell")
        );
    }
}
