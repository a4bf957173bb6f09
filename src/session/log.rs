//! The session log: one JSON line per session in `$XDG_STATE_HOME/sbx-shell/sessions.jsonl`
//! (default `~/.local/state/…`), and `sbx-shell log` to read it.
//!
//! A line holds when and where the session ran, what ran, under which profile, backend and
//! layers, a digest of the resolved policy (so two sessions can be told to have run under the
//! same rules), how it ended and the network refusals. Never an environment value: the
//! policy's `set` values are part of the digest only.

use crate::sys::files::rfc3339;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::policy::refusal::Tally;
use crate::policy::Policy;
use crate::sandbox::Backend;

/// One session, as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// RFC 3339, UTC.
    pub start: String,
    pub end: String,
    pub duration_ms: u64,
    pub command: Vec<String>,
    pub cwd: String,
    pub profile: String,
    pub backend: String,
    pub layers: Vec<String>,
    /// "sha256:…" of the resolved policy's JSON.
    pub policy_digest: String,
    /// sbx-shell's exit status (the program's, 128+N for signal N, 124 after the timeout).
    pub exit_status: u8,
    pub network_refused: u64,
    /// Places in the writable trees that would run code outside and that the session
    /// made or changed (`planted`): "PATH (what)".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planted: Vec<String>,
    /// What the sandbox refused, by kind: each subject with its count, and the options
    /// that allow them (`policy::refusal`).
    #[serde(default, skip_serializing_if = "Tally::is_empty")]
    pub refusals: Tally,
    /// The supervisor's pid, which named its journal file while it ran
    /// (`session::journal`; `log --follow` tells by it which sessions it followed).
    #[serde(default)]
    pub session: u32,
}

impl SessionRecord {
    /// The record of a session that started at `started` and ends now.
    pub fn new<'a>(
        started: SystemTime,
        command: impl Iterator<Item = &'a OsString>,
        cwd: Option<&Path>,
        policy: &Policy,
        backend: &Backend,
        exit_status: u8,
        network_refused: u64,
    ) -> SessionRecord {
        let policy_json = serde_json::to_string(policy).unwrap_or_default();
        SessionRecord {
            start: rfc3339(started),
            end: rfc3339(SystemTime::now()),
            duration_ms: started
                .elapsed()
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            command: command.map(|a| a.to_string_lossy().into_owned()).collect(),
            cwd: cwd.map_or_else(String::new, |c| c.display().to_string()),
            profile: policy.profile.clone(),
            backend: backend.name().to_string(),
            layers: backend.layers().iter().map(|l| l.to_string()).collect(),
            policy_digest: digest(&policy_json),
            exit_status,
            network_refused,
            planted: Vec::new(),
            refusals: Tally::default(),
            session: std::process::id(),
        }
    }

    /// With the places the session planted.
    pub fn with_planted(mut self, planted: &[crate::protect::planted::Planted]) -> SessionRecord {
        self.planted = planted.iter().map(ToString::to_string).collect();
        self
    }

    /// With what the sandbox refused.
    pub fn with_refusals(mut self, refusals: Tally) -> SessionRecord {
        self.refusals = refusals;
        self
    }
}

/// The log file for `home`.
pub fn path(home: &Path) -> PathBuf {
    crate::sys::files::state_dir(home).join("sessions.jsonl")
}

/// "sha256:HEX" of `policy_json`.
pub fn digest(policy_json: &str) -> String {
    let hash = Sha256::digest(policy_json.as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Append `record` to the log (its directory made private). Errors are the caller's to
/// report; a session is never failed for its log.
pub fn append(home: &Path, record: &SessionRecord) -> std::io::Result<()> {
    let mut line = serde_json::to_string(record)?;
    line.push('\n');
    let mut file = crate::sys::files::append_private(&path(home))?;
    // One write: appends of a line never interleave with another session's.
    file.write_all(line.as_bytes())
}

/// The last `count` records of `text` (lines that do not parse are skipped).
pub fn last(text: &str, count: usize) -> Vec<SessionRecord> {
    let all: Vec<SessionRecord> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let skip = all.len().saturating_sub(count);
    all.into_iter().skip(skip).collect()
}

/// `sbx-shell log` as a table; under each session, what the sandbox refused (paths under
/// `home` spelled `~`).
pub fn render(records: &[SessionRecord], home: &Path) -> String {
    let mut out = String::from(
        "START                 DURATION  EXIT  BACKEND   PROFILE   REFUSED  CWD  COMMAND\n",
    );
    for r in records {
        out.push_str(&format!(
            "{:<21} {:>8}  {:>4}  {:<8}  {:<8}  {:>7}  {}  {}\n",
            r.start,
            human_duration(r.duration_ms),
            r.exit_status,
            r.backend,
            r.profile,
            match r.refusals.is_empty() {
                true => r.network_refused,
                false => r.refusals.refused(),
            },
            r.cwd,
            r.command.join(" ")
        ));
        for line in r.refusals.detail(home) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

fn human_duration(ms: u64) -> String {
    match ms {
        0..=9_999 => format!("{:.1}s", ms as f64 / 1000.0),
        10_000..=5_999_999 => format!("{}m{:02}s", ms / 60_000, ms / 1000 % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms / 60_000 % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn record(n: u8) -> SessionRecord {
        SessionRecord {
            start: "2026-11-22T10:00:00Z".into(),
            end: "2026-11-22T10:01:05Z".into(),
            duration_ms: 65_000,
            command: vec!["claude".into()],
            cwd: "/home/u/p".into(),
            profile: "claude".into(),
            backend: "bwrap".into(),
            layers: vec!["bwrap".into(), "landlock".into(), "seccomp".into()],
            policy_digest: digest("{}"),
            exit_status: n,
            network_refused: 2,
            planted: Vec::new(),
            refusals: Tally::default(),
            session: 4242,
        }
    }

    #[test]
    fn times_are_rfc3339_utc() {
        let at = |secs| rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(at(1_795_348_034), "2026-11-22T11:47:14Z");
        assert_eq!(at(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn the_digest_is_sha256() {
        assert_eq!(
            digest("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_log_keeps_the_last_records_and_skips_garbage() {
        let lines: Vec<String> = (0..5)
            .map(|n| serde_json::to_string(&record(n)).unwrap())
            .collect();
        let text = format!(
            "{}\nnot json\n{}\n",
            lines[..3].join("\n"),
            lines[3..].join("\n")
        );
        let got = last(&text, 2);
        assert_eq!(got, [record(3), record(4)]);
        let table = render(&got, Path::new("/home/u"));
        assert!(
            table.contains("1m05s") && table.contains("claude"),
            "{table}"
        );
        assert_eq!(table.lines().count(), 3);
    }
}
