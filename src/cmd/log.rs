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
/// is picked up too. Every session that ends while it follows is shown whole: its journal
/// is read to the end before it is let go, and a session that began and ended between two
/// looks (a journal never seen) is shown from its record in the session log, which every
/// session appends when it ends. Runs until interrupted.
pub fn follow(json: bool) -> Result<u8, Failure> {
    use std::collections::{BTreeMap, BTreeSet};
    use std::io::{BufRead, BufReader, Seek, Write};
    let home = inputs::home_dir()?;
    let dir = journal::dir(&home);
    crate::sys::say::Verbosity::default().always(&format!(
        "following what the sandbox refuses in running sessions ({}); Ctrl-C ends it",
        dir.display()
    ));
    // Each journal with what was read of a line not yet whole, by its session's pid.
    let mut open: BTreeMap<std::path::PathBuf, (u32, BufReader<std::fs::File>, String)> =
        BTreeMap::new();
    // The sessions whose journal was read (until their record arrives).
    let mut followed: BTreeSet<u32> = BTreeSet::new();
    // The session log from where it ends now: the records of sessions that end from here on.
    let mut records = std::fs::File::open(log::path(&home)).ok().map(|mut f| {
        let _ = f.seek(std::io::SeekFrom::End(0));
        (BufReader::new(f), String::new())
    });
    let write = |text: &str| {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| anyhow!("cannot write: {e}"))
    };
    loop {
        // Looked at before the journals are read: one that ended by now is whole.
        let running = journal::running(&dir);
        for (pid, path) in &running {
            if let (std::collections::btree_map::Entry::Vacant(slot), Ok(file)) =
                (open.entry(path.clone()), std::fs::File::open(path))
            {
                slot.insert((*pid, BufReader::new(file), String::new()));
                followed.insert(*pid);
            }
        }
        // The records of sessions that ended, read before their journals: a session
        // appends its record after its last journal line, so those journals are whole.
        if records.is_none() {
            records = std::fs::File::open(log::path(&home))
                .ok()
                .map(|f| (BufReader::new(f), String::new()));
        }
        let mut ended = Vec::new();
        if let Some((reader, line)) = records.as_mut() {
            while reader.read_line(line).is_ok_and(|n| n > 0) && line.ends_with('\n') {
                ended.extend(serde_json::from_str::<log::SessionRecord>(line).ok());
                line.clear();
            }
        }
        for (_, reader, line) in open.values_mut() {
            // A line is whole once it ends in a newline (each is one write).
            while reader.read_line(line).is_ok_and(|n| n > 0) && line.ends_with('\n') {
                write(&match json {
                    true => line.clone(),
                    false => render_live(line, &home),
                })?;
                line.clear();
            }
        }
        open.retain(|path, _| running.iter().any(|(_, p)| p == path));
        for record in ended {
            if !followed.remove(&record.session) {
                write(&render_ended(&record, json, &home))?;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The refusals of a session that ended before its journal was seen, from its record: each
/// subject with its count and the options that allow its kind.
fn render_ended(record: &log::SessionRecord, json: bool, home: &std::path::Path) -> String {
    let mut out = String::new();
    for (kind, tally) in &record.refusals.0 {
        for (subject, count) in &tally.subjects {
            if json {
                let line = serde_json::json!({
                    "time": record.end,
                    "session": record.session,
                    "kind": kind.name(),
                    "subject": subject,
                    "count": count,
                    "fixes": tally.fixes,
                    "ended": true,
                });
                out.push_str(&format!("{line}\n"));
                continue;
            }
            let clock = record.end.get(11..19).unwrap_or(&record.end);
            let fixes = match tally.fixes.is_empty() {
                true => String::new(),
                false => format!(" → {}", refusal::printable(&tally.fixes.join("; "))),
            };
            out.push_str(&format!(
                "{clock} [{}] {}: {} ×{count} (the session ended between two looks: from the session log){fixes}\n",
                record.session,
                kind.name(),
                refusal::shown_subject(*kind, subject, home),
            ));
        }
    }
    out
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
