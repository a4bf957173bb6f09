//! `sbx-shell home`: the private homes (`privatehome`), listed with their size, or emptied.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, Context};

use crate::cmd::inputs;
use crate::policy::home;
use crate::sys::exit::Failure;

pub fn main(clear: Option<&str>, clear_all: bool) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let homes = crate::sys::files::state_dir(&home).join(home::HOMES_DIR);
    let existing = list(&homes)?;
    if clear_all || clear.is_some() {
        let chosen: Vec<&str> = match clear {
            Some(name) => {
                let dir = home::dir_of(&crate::sys::files::state_dir(&home), name);
                let Some(found) = existing.iter().find(|(_, d, _)| *d == dir) else {
                    return Err(super::messages::no_private_home(name, &homes).into());
                };
                vec![found.0.as_str()]
            }
            None => existing.iter().map(|(n, _, _)| n.as_str()).collect(),
        };
        let mut out = String::new();
        for name in chosen {
            let dir = homes.join(name);
            // remove_dir_all does not follow symlinks: what the program left there cannot
            // lead the removal out of the directory.
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("cannot remove {}", dir.display()))?;
            let _ = writeln!(out, "emptied {} ({name})", dir.display());
        }
        return crate::sys::say::write_stdout(out.as_bytes());
    }
    let mut out = String::new();
    if existing.is_empty() {
        let _ = writeln!(out, "no private homes yet in {}", homes.display());
    }
    for (name, dir, bytes) in &existing {
        let _ = writeln!(out, "{name:<12} {:>10}  {}", human(*bytes), dir.display());
    }
    crate::sys::say::write_stdout(out.as_bytes())
}

/// Each private home: its profile's name, directory and size in bytes.
fn list(homes: &Path) -> Result<Vec<(String, std::path::PathBuf, u64)>, Failure> {
    let entries = match std::fs::read_dir(homes) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(anyhow!("cannot read {}: {e}", homes.display()).into()),
    };
    let mut out: Vec<_> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let dir = e.path();
            (
                e.file_name().to_string_lossy().into_owned(),
                dir.clone(),
                size(&dir),
            )
        })
        .collect();
    out.sort();
    Ok(out)
}

/// The bytes under `dir`, symlinks not followed.
fn size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => size(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

fn human(bytes: u64) -> String {
    const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}
