//! `sbx-shell log`: the last sessions from the session log.

use anyhow::anyhow;

use crate::cmd::inputs;
use crate::session::log;
use crate::sys::exit::Failure;

pub fn main(count: usize, json: bool) -> Result<u8, Failure> {
    let home = inputs::home_dir()?;
    let path = log::path(&home);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => {
            return Err(anyhow!("cannot read the session log {}: {e}", path.display()).into())
        }
    };
    let records = log::last(&text, count);
    let out = if json {
        records
            .iter()
            .map(|r| serde_json::to_string(r).map(|line| line + "\n"))
            .collect::<Result<String, _>>()?
    } else if records.is_empty() {
        format!("no sessions logged yet in {}\n", path.display())
    } else {
        log::render(&records)
    };
    crate::sys::say::write_stdout(out.as_bytes())
}
