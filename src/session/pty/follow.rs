//! The session followed as the terminal around it sees it (Linux): a terminal (tmux's
//! `#{pane_current_path}` and `#{pane_current_command}`, a terminal's "new tab here") asks
//! the process in the foreground of *its* terminal — sbx-shell — for its working directory
//! and its command. So sbx-shell takes on those of the program in the foreground of the
//! inner terminal: it changes to the program's directory when the host has that very
//! directory at that path (a session's private `/tmp` is not followed), and shows the
//! program's command name as its own (`sys::title`). Looked at after the program's output
//! (a shell's prompt after `cd`), at most every `EVERY`, and once more after its last.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::unistd::Pid;

use crate::sys::title::Title;

/// How often, at most, the foreground program is looked at.
const EVERY: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(super) struct Follow {
    title: Option<Title>,
    shown: Vec<u8>,
    /// The directory followed last (`st_dev`, `st_ino`).
    cwd: Option<(u64, u64)>,
    last: Option<Instant>,
    /// The program wrote since the last look.
    wanted: bool,
}

impl Follow {
    pub(super) fn new() -> Follow {
        Follow {
            title: Title::own(),
            shown: Vec::new(),
            cwd: None,
            last: None,
            wanted: false,
        }
    }

    /// The program wrote: look again once `EVERY` has passed since the last look.
    pub(super) fn wrote(&mut self) {
        self.wanted = true;
    }

    /// When the next look is due, if one is wanted.
    pub(super) fn due(&self) -> Option<Instant> {
        self.wanted
            .then(|| self.last.map_or_else(Instant::now, |at| at + EVERY))
    }

    /// Take on the directory and the command of `group`'s leader (the inner terminal's
    /// foreground), when a look is due.
    pub(super) fn look(&mut self, group: Option<Pid>, now: Instant) {
        let early = self.last.is_some_and(|at| now < at + EVERY);
        if !self.wanted || early {
            return;
        }
        self.wanted = false;
        self.last = Some(now);
        let Some(leader) = group.map(Pid::as_raw).filter(|p| *p > 0) else {
            return;
        };
        self.follow_cwd(leader);
        self.follow_name(leader);
    }

    fn follow_cwd(&mut self, leader: i32) {
        let link = format!("/proc/{leader}/cwd");
        let Ok(there) = std::fs::metadata(&link) else {
            return;
        };
        let id = (there.dev(), there.ino());
        if self.cwd == Some(id) {
            return;
        }
        let Ok(path) = std::fs::read_link(&link) else {
            return;
        };
        if same_here(&path, id) && std::env::set_current_dir(&path).is_ok() {
            self.cwd = Some(id);
        }
    }

    fn follow_name(&mut self, leader: i32) {
        let Some(title) = &self.title else { return };
        let Ok(cmdline) = std::fs::read(format!("/proc/{leader}/cmdline")) else {
            return;
        };
        let name = command_name(&cmdline);
        if !name.is_empty() && name != self.shown.as_slice() {
            title.show(name);
            self.shown = name.to_vec();
        }
    }
}

/// Whether `path`, as this process sees it, is the directory `id`.
fn same_here(path: &PathBuf, id: (u64, u64)) -> bool {
    path.is_absolute() && std::fs::metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == id)
}

/// The command a process's `cmdline` names: its first word's last component (a login
/// shell's leading `-` kept, as the terminal shows it bare).
pub(super) fn command_name(cmdline: &[u8]) -> &[u8] {
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    first.rsplit(|b| *b == b'/').next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_named_by_its_first_words_last_component() {
        assert_eq!(command_name(b"/usr/bin/vim\0notes.txt\0"), b"vim");
        assert_eq!(command_name(b"-bash\0"), b"-bash");
        assert_eq!(command_name(b"python3\0-m\0http.server\0"), b"python3");
        assert_eq!(command_name(b""), b"");
    }

    #[test]
    fn a_directory_is_followed_only_where_the_host_has_that_very_one() {
        let here = std::env::current_dir().unwrap();
        let m = std::fs::metadata(&here).unwrap();
        assert!(same_here(&here, (m.dev(), m.ino())));
        assert!(!same_here(&here, (m.dev(), m.ino() + 1)));
        assert!(!same_here(&PathBuf::from("relative"), (m.dev(), m.ino())));
    }
}
