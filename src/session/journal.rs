//! The session's refusals, as they happen: every place that refuses records into one
//! `Journal` (through `policy::refusal::Sink`), which keeps the tally for the end of the
//! session and appends each new subject, once, to the session's journal file —
//! `$XDG_STATE_HOME/sbx-shell/refusals/PID.jsonl`, PID being the supervisor's. `sbx-shell
//! log --follow` reads those files while their sessions run, and the program itself reads
//! its own through `SBX_REFUSALS` (read-only, as sbx-shell's state directory is). The file
//! is removed when the session ends; the session log keeps the complete tally.
//!
//! The guard's reports arrive on a pipe (`listen`): one line per refusal, a cause letter
//! (`report::Cause::code`) and the path; the guard never waits on it (a full pipe drops
//! the report, not the program's call). Besides, it reports the directories of git's state
//! the session touched (`protect::gitstate`), kept here for the end of the session
//! (`states`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::policy::refusal::{Refusal, Sink, Tally};
use crate::policy::report::{parse_report, parse_state, Cause};

/// How long the reader of the guard's reports rests after each batch: at the guard's
/// fastest (a refusal in about 20 µs) a batch is some 250 reports, well within a pipe.
const BATCH: std::time::Duration = std::time::Duration::from_millis(5);

/// How many judged reports the reader remembers.
const JUDGED: usize = 4096;

/// The environment variable that names the journal file inside the sandbox.
pub const VARIABLE: &str = "SBX_REFUSALS";

/// The directory of the running sessions' journal files.
pub fn dir(home: &Path) -> PathBuf {
    crate::sys::files::state_dir(home).join("refusals")
}

#[derive(Default)]
struct Inner {
    /// The session is over: readers that wait for quiet may stop.
    ending: bool,
    tally: Tally,
    /// The state directories of git's the guard reported (`parse_state`), and whether its
    /// reports were read to their end (every writer gone).
    states: std::collections::BTreeSet<PathBuf>,
    reports_ended: bool,
    file: Option<File>,
    /// One per reader of the guard's reports: disconnected once it read to the end.
    readers: Vec<std::sync::mpsc::Receiver<()>>,
}

/// One session's refusals.
#[derive(Clone, Default)]
pub struct Journal {
    inner: Arc<Mutex<Inner>>,
    path: Option<PathBuf>,
}

impl Journal {
    /// The journal of this session, its file made in `dir` (a session runs without one
    /// when it cannot be made: the tally is kept all the same), and what removes the file
    /// when dropped, however the run ends. Files of sessions that are gone (killed with
    /// SIGKILL) are removed (`session::claim`).
    pub fn open(dir: &Path) -> (Journal, Removal) {
        let taken = crate::sys::files::create_private_dir(dir).and_then(|()| {
            shared(dir).take(&std::process::id().to_string(), &|p| {
                crate::sys::files::append_private(p).map(drop)
            })
        });
        let Ok(claim) = taken else {
            return (Journal::default(), Removal { _claim: None });
        };
        let Ok(file) = crate::sys::files::append_private(claim.path()) else {
            return (
                Journal::default(),
                Removal {
                    _claim: Some(claim),
                },
            );
        };
        let journal = Journal {
            inner: Arc::new(Mutex::new(Inner {
                file: Some(file),
                ..Inner::default()
            })),
            path: Some(claim.path().to_path_buf()),
        };
        (
            journal,
            Removal {
                _claim: Some(claim),
            },
        )
    }

    /// The journal file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Count `times` refusals like `r`; a subject new for its kind goes to the file.
    pub fn record(&self, r: &Refusal, times: u64) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if !inner.tally.add(r, times) {
            return;
        }
        if let Some(file) = inner.file.as_mut() {
            let mut line = serde_json::json!({
                "time": crate::sys::files::rfc3339(std::time::SystemTime::now()),
                "session": std::process::id(),
            });
            if let (Some(map), Ok(serde_json::Value::Object(r))) =
                (line.as_object_mut(), serde_json::to_value(r))
            {
                map.extend(r);
            }
            let mut text = line.to_string();
            text.push('\n');
            // One write per line: a reader never sees half of one.
            let _ = file.write_all(text.as_bytes());
        }
    }

    /// Where the refusing places send theirs.
    pub fn sink(&self) -> Sink {
        let journal = self.clone();
        Sink::new(move |r| journal.record(&r, 1))
    }

    /// The session's refusals so far.
    pub fn tally(&self) -> Tally {
        self.inner
            .lock()
            .map(|i| i.tally.clone())
            .unwrap_or_default()
    }

    /// Read the guard's reports from `reports` until every writer is gone, each judged by
    /// `judge` (`refusal::of_write` with the session's policy; `None`: not the sandbox's
    /// refusal) once per cause and path.
    /// What has arrived is taken in one batch, then the thread rests `BATCH` (a program
    /// that retries a refused write in a loop wakes it once per batch, not per call).
    /// Returns at once.
    pub fn listen(
        &self,
        reports: OwnedFd,
        judge: impl Fn(Cause, &Path, &str) -> Option<Refusal> + Send + 'static,
    ) -> std::io::Result<()> {
        let journal = self.clone();
        let (done, drained) = std::sync::mpsc::channel::<()>();
        if let Ok(mut inner) = self.inner.lock() {
            inner.readers.push(drained);
        }
        crate::sys::process::spawn_quiet("sbx-refusals", move || {
            let _done = done;
            let mut lines = BufReader::with_capacity(1 << 16, File::from(reports));
            let mut line = Vec::new();
            let mut judged: HashMap<(Cause, PathBuf, String), Option<Refusal>> = HashMap::new();
            while lines.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                if let Some(dir) = parse_state(&line) {
                    if let Ok(mut inner) = journal.inner.lock() {
                        inner.states.insert(dir);
                    }
                } else if let Some(key) = parse_report(&line) {
                    if judged.len() >= JUDGED && !judged.contains_key(&key) {
                        judged.clear();
                    }
                    let r = judged
                        .entry(key)
                        .or_insert_with_key(|(cause, path, about)| judge(*cause, path, about));
                    if let Some(r) = r {
                        journal.record(r, 1);
                    }
                }
                line.clear();
                if lines.buffer().is_empty() {
                    std::thread::sleep(BATCH);
                }
            }
            if let Ok(mut inner) = journal.inner.lock() {
                inner.reports_ended = true;
            }
        })
    }

    /// Read Landlock's refusals of this session from the audit (`session::audit`, through
    /// `reader`: those of the domains that refused `marker`), each judged by `judge`, until
    /// the session ends and the records go quiet. Returns at once.
    #[cfg(target_os = "linux")]
    pub fn read_landlock(
        &self,
        reader: super::audit::AuditReader,
        marker: PathBuf,
        judge: impl Fn(&[String], &Path) -> Option<Refusal> + Send + 'static,
    ) -> std::io::Result<()> {
        let journal = self.clone();
        let (done, drained) = std::sync::mpsc::channel::<()>();
        if let Ok(mut inner) = self.inner.lock() {
            inner.readers.push(drained);
        }
        crate::sys::process::spawn_quiet("sbx-landlock-audit", move || {
            let _done = done;
            let ending = || journal.inner.lock().map_or(true, |i| i.ending);
            reader.run(&marker, &ending, &judge, &|r| journal.record(&r, 1));
        })
    }

    /// Wait, at most `limit`, until the guard's reports are read to their end (every
    /// writer gone): the last refusals come in before the summary.
    pub fn drain(&self, limit: std::time::Duration) {
        let readers = match self.inner.lock() {
            Ok(mut inner) => {
                inner.ending = true;
                std::mem::take(&mut inner.readers)
            }
            Err(_) => return,
        };
        let until = std::time::Instant::now() + limit;
        for r in readers {
            let left = until.saturating_duration_since(std::time::Instant::now());
            let _ = r.recv_timeout(left);
        }
    }

    /// The state directories of git's the guard reported (`/`: every one in the writable
    /// trees), once its reports were read to their end; `None` before, or without a guard.
    pub fn states(&self) -> Option<Vec<PathBuf>> {
        let inner = self.inner.lock().ok()?;
        inner
            .reports_ended
            .then(|| inner.states.iter().cloned().collect())
    }
}

/// Removes the session's journal file, then its lock, when dropped (the session log keeps
/// the tally).
pub struct Removal {
    _claim: Option<crate::session::claim::Claim>,
}

/// The journal files: `PID.jsonl`, each with its lock `PID.lock` beside it.
fn shared(dir: &Path) -> crate::session::claim::Claims<'_> {
    crate::session::claim::Claims {
        suffix: ".jsonl",
        ..crate::session::claim::Claims::beside(dir, "", crate::session::claim::remove_file)
    }
}

/// The journal files of sessions still running, by their supervisor's pid: those whose
/// lock is held (a session holds its lock until it ends, however it ends).
pub fn running(dir: &Path) -> Vec<(u32, PathBuf)> {
    shared(dir)
        .alive()
        .into_iter()
        .filter_map(|(name, path)| Some((name.split('-').next()?.parse().ok()?, path)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::refusal::Kind;

    #[test]
    fn a_journal_writes_each_subject_once_and_counts_every_one() {
        let dir = std::env::temp_dir().join(format!("sbx-journal-test-{}", std::process::id()));
        let (journal, removal) = Journal::open(&dir);
        let r = Refusal {
            kind: Kind::Lookup,
            subject: "example.com".into(),
            why: "no network".into(),
            fix: Some("--net allow=example.com".into()),
        };
        journal.record(&r, 1);
        journal.sink().record(r.clone());
        let path = journal.path().unwrap().to_path_buf();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["kind"], "lookup");
        assert_eq!(line["fix"], "--net allow=example.com");
        assert_eq!(journal.tally().refused(), 2);
        assert_eq!(running(&dir), [(std::process::id(), path.clone())]);
        // Another session's file, its lock free (the session killed).
        let stale = dir.join("1.jsonl");
        std::fs::write(&stale, "").unwrap();
        std::fs::write(dir.join("1.lock"), "").unwrap();
        assert_eq!(running(&dir).len(), 1);
        let (again, _removal) = Journal::open(&dir);
        assert!(!stale.exists(), "a stale journal is removed");
        drop((again, _removal));
        drop(removal);
        assert!(!path.exists());
        assert!(!dir.join("1.lock").exists());
        std::fs::remove_dir(&dir).unwrap();
    }
}
