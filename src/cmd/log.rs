//! `sbx-shell log`: the last sessions from the session log.

use anyhow::anyhow;

use crate::cmd::inputs;
use crate::policy::refusal;
use crate::session::{journal, log};
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
        log::render(&records, &home)
    };
    crate::sys::say::write_stdout(out.as_bytes())
}

/// `sbx-shell log --follow`: the refusals of the running sessions as they happen, read
/// from their journal files (`session::journal`), each line once; a session started later
/// is picked up too. Runs until interrupted.
pub fn follow(json: bool) -> Result<u8, Failure> {
    use std::collections::BTreeMap;
    use std::io::{BufRead, BufReader, Write};
    let home = inputs::home_dir()?;
    let dir = journal::dir(&home);
    crate::sys::say::Verbosity::default().always(&format!(
        "following what the sandbox refuses in running sessions ({}); Ctrl-C ends it",
        dir.display()
    ));
    // Each file with what was read of a line not yet whole.
    let mut open: BTreeMap<std::path::PathBuf, (BufReader<std::fs::File>, String)> =
        BTreeMap::new();
    loop {
        let running = journal::running(&dir);
        open.retain(|path, _| running.iter().any(|(_, p)| p == path));
        for (_, path) in running {
            if let (std::collections::btree_map::Entry::Vacant(slot), Ok(file)) =
                (open.entry(path.clone()), std::fs::File::open(&path))
            {
                slot.insert((BufReader::new(file), String::new()));
            }
        }
        let mut out = std::io::stdout().lock();
        for (reader, line) in open.values_mut() {
            // A line is whole once it ends in a newline (each is one write).
            while reader.read_line(line).is_ok_and(|n| n > 0) && line.ends_with('\n') {
                let shown = match json {
                    true => line.clone(),
                    false => render_live(line, &home),
                };
                out.write_all(shown.as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| anyhow!("cannot write: {e}"))?;
                line.clear();
            }
        }
        drop(out);
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// One journal line for a reader: time, session, kind, subject, why and the option.
fn render_live(line: &str, home: &std::path::Path) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
        return String::new();
    };
    let Ok(r) = serde_json::from_value::<refusal::Refusal>(v.clone()) else {
        return String::new();
    };
    let time = v["time"].as_str().unwrap_or_default();
    let clock = time.get(11..19).unwrap_or(time);
    let subject = refusal::shown_subject(r.kind, &r.subject, home);
    let fix = r
        .fix
        .map(|f| format!(" → {}", refusal::printable(&f)))
        .unwrap_or_default();
    format!(
        "{clock} [{}] {}: {subject} ({}){fix}\n",
        v["session"],
        r.kind.name(),
        refusal::printable(&r.why)
    )
}
