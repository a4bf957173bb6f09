//! What this process shows as its command (Linux): its `argv[0]`, which `/proc/PID/cmdline`
//! reads from the process's own memory (what tmux's `#{pane_current_command}` and `ps`
//! show), and its `comm` (`PR_SET_NAME`: `top`, `ps -o comm`). The name is written over
//! the original arguments in place, so it is as long as they were at most.

/// The original arguments' place in this process's memory (`/proc/self/stat`'s
/// `arg_start` and `arg_end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Title {
    start: usize,
    len: usize,
}

impl Title {
    /// This process's arguments, where `/proc/self/stat` says they are.
    pub fn own() -> Option<Title> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let (start, end) = arg_area(&stat)?;
        (end > start).then_some(Title {
            start,
            len: end - start,
        })
    }

    /// Show `name` as this process's command: in `argv[0]` (cut to the arguments'
    /// length, the rest zeroed, so nothing of them shows) and as its `comm`.
    pub fn show(&self, name: &[u8]) {
        let name = name.split(|b| *b == 0).next().unwrap_or_default();
        let keep = name.len().min(self.len - 1);
        // SAFETY: [start, start + len) is this process's own argument area, which the
        // kernel mapped writable on its stack and which nothing here holds a reference
        // into (the arguments were copied when they were parsed); `keep` < `len`.
        unsafe {
            let area = std::slice::from_raw_parts_mut(self.start as *mut u8, self.len);
            area[..keep].copy_from_slice(&name[..keep]);
            area[keep..].fill(0);
        }
        let mut comm = [0u8; 16];
        let short = name.len().min(15);
        comm[..short].copy_from_slice(&name[..short]);
        // SAFETY: a NUL-terminated buffer of 16 bytes, which PR_SET_NAME reads.
        unsafe { libc::prctl(libc::PR_SET_NAME, comm.as_ptr()) };
    }
}

/// `arg_start` and `arg_end` from the text of `/proc/PID/stat` (fields 48 and 49, counted
/// after the command in parentheses, which may hold spaces and parentheses itself).
pub fn arg_area(stat: &str) -> Option<(usize, usize)> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field 3 (state) is the first after the command: field N is at N - 3.
    let start = fields.get(48 - 3)?.parse().ok()?;
    let end = fields.get(49 - 3)?.parse().ok()?;
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_argument_area_is_read_past_a_command_with_spaces_and_parentheses() {
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[48 - 3] = "140737000".into();
        fields[49 - 3] = "140737020".into();
        let stat = format!("4242 (a (b) c) {}", fields.join(" "));
        assert_eq!(arg_area(&stat), Some((140737000, 140737020)));
        assert_eq!(arg_area("4242 (x) S 1"), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        let (start, end) = arg_area(&own).unwrap();
        assert!(end > start);
    }
}
