//! `sbx-shell doctor`: which backends and layers can run here, and why not. Exits 1 when the
//! default backend cannot run.

pub mod checks;

use crate::host::{self, Machine, Probes};
use crate::sys::exit::{self, Failure};

pub fn main(json: bool) -> Result<u8, Failure> {
    // A fresh probe, whose success the runs then reuse.
    let cache = crate::cmd::inputs::home_dir()
        .ok()
        .map(|h| host::probe_cache(&h));
    let report = checks::evaluate(&Machine::measure(Probes::Fresh(cache.as_deref())));
    let text = if json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        checks::render_text(&report)
    };
    crate::sys::say::write_stdout(text.as_bytes())?;
    Ok(if report.default_backend_can_run {
        0
    } else {
        exit::FAILURE
    })
}
