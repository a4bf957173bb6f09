//! Which terminal modes the child switched on, so exactly those are switched off at exit.
//!
//! A TUI that crashes (or is killed) leaves the user's terminal in modes that `stty sane`
//! does not undo: the alternate screen, bracketed paste, the kitty keyboard protocol,
//! modifyOtherKeys, mouse reporting, focus events, a hidden cursor. The tracker watches the
//! output stream with a real escape-sequence parser (`vte`, so sequences split across reads
//! and payloads of DCS/OSC strings are handled correctly) and `reset_sequence` switches off
//! only what is still on. It never changes the stream itself.

/// DEC private modes we track. For 25 (cursor visible) "on" means *hidden*.
const TRACKED: [u16; 17] = [
    1,    // application cursor keys (DECCKM): arrows send SS3, breaking shells' line editors
    9,    // X10 mouse
    25,   // cursor visibility (tracked inverted: `?25l` hides)
    47,   // alternate screen (old)
    1000, // mouse: press/release
    1001, // mouse: highlight
    1002, // mouse: button motion
    1003, // mouse: any motion
    1004, // focus in/out events
    1005, // mouse: UTF-8 coordinates
    1006, // mouse: SGR coordinates
    1015, // mouse: urxvt coordinates
    1016, // mouse: SGR pixel coordinates
    1047, // alternate screen
    1049, // alternate screen with saved cursor
    2004, // bracketed paste
    2026, // synchronized output
];
const CURSOR: u16 = 25;
const ALT_SCREENS: [u16; 3] = [1049, 1047, 47];

/// Feeds output bytes through a parser and remembers what is switched on.
pub struct ModeTracker {
    parser: vte::Parser,
    modes: Modes,
}

impl Default for ModeTracker {
    fn default() -> Self {
        ModeTracker {
            parser: vte::Parser::new(),
            modes: Modes::default(),
        }
    }
}

impl ModeTracker {
    /// Account for bytes the child wrote.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.modes, bytes);
    }

    /// The bytes that switch off everything the child left on; empty when nothing is on.
    pub fn reset_sequence(&self) -> Vec<u8> {
        self.modes.reset_sequence()
    }
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Modes {
    /// Bit i: TRACKED[i] is on.
    private: u32,
    /// Kitty keyboard pushes, per screen: [main, alternate] (terminals keep one stack each).
    kitty_pushes: [u32; 2],
    /// Kitty flags set without a push (`CSI = flags u`), per screen.
    kitty_base_set: [bool; 2],
    modify_other_keys: bool,
    keypad_application: bool,
}

impl Modes {
    fn is_on(&self, mode: u16) -> bool {
        TRACKED
            .iter()
            .position(|m| *m == mode)
            .is_some_and(|i| self.private & (1 << i) != 0)
    }

    fn set(&mut self, mode: u16, on: bool) {
        if let Some(i) = TRACKED.iter().position(|m| *m == mode) {
            if on {
                self.private |= 1 << i;
            } else {
                self.private &= !(1 << i);
            }
        }
    }

    fn screen(&self) -> usize {
        usize::from(ALT_SCREENS.iter().any(|m| self.is_on(*m)))
    }

    fn reset_sequence(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let in_alt = self.screen() == 1;
        if in_alt {
            self.write_kitty_reset(1, &mut out);
        }
        for mode in TRACKED
            .iter()
            .filter(|m| !ALT_SCREENS.contains(m) && self.is_on(**m))
        {
            let action = if *mode == CURSOR { 'h' } else { 'l' };
            out.extend(format!("\x1b[?{mode}{action}").bytes());
        }
        for mode in ALT_SCREENS.iter().filter(|m| self.is_on(**m)) {
            out.extend(format!("\x1b[?{mode}l").bytes());
        }
        self.write_kitty_reset(0, &mut out);
        if self.modify_other_keys {
            out.extend(b"\x1b[>4;0m");
        }
        if self.keypad_application {
            out.extend(b"\x1b>");
        }
        out
    }

    fn write_kitty_reset(&self, screen: usize, out: &mut Vec<u8>) {
        if self.kitty_pushes[screen] > 0 {
            out.extend(format!("\x1b[<{}u", self.kitty_pushes[screen]).bytes());
        }
        if self.kitty_base_set[screen] {
            out.extend(b"\x1b[=0;1u");
        }
    }

    fn kitty(&mut self, marker: u8, params: &[u16]) {
        let screen = self.screen();
        let first = params.first().copied();
        match marker {
            b'>' => self.kitty_pushes[screen] = self.kitty_pushes[screen].saturating_add(1),
            b'<' => {
                let count = u32::from(first.filter(|n| *n > 0).unwrap_or(1));
                self.kitty_pushes[screen] = self.kitty_pushes[screen].saturating_sub(count);
            }
            b'=' if self.kitty_pushes[screen] == 0 => {
                let flags = first.unwrap_or(0);
                match params.get(1).copied().unwrap_or(1) {
                    1 => self.kitty_base_set[screen] = flags != 0,
                    2 => self.kitty_base_set[screen] |= flags != 0,
                    _ => {} // 3 clears some bits: whether any remain is unknown, keep as is
                }
            }
            _ => {}
        }
    }
}

impl vte::Perform for Modes {
    fn csi_dispatch(
        &mut self,
        params: &vte::Params,
        intermediates: &[u8],
        ignore: bool,
        action: char,
    ) {
        if ignore {
            return;
        }
        let values: Vec<u16> = params
            .iter()
            .map(|p| p.first().copied().unwrap_or(0))
            .collect();
        match (intermediates, action) {
            ([b'?'], 'h' | 'l') => {
                for mode in &values {
                    let on = action == 'h';
                    self.set(*mode, if *mode == CURSOR { !on } else { on });
                }
            }
            ([marker @ (b'>' | b'<' | b'=')], 'u') => self.kitty(*marker, &values),
            ([b'>'], 'm') => match values.as_slice() {
                [] | [0] => self.modify_other_keys = false,
                [4] => self.modify_other_keys = false,
                [4, level, ..] => self.modify_other_keys = *level != 0,
                _ => {}
            },
            ([b'>'], 'n') if values.first() == Some(&4) => self.modify_other_keys = false,
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], ignore: bool, byte: u8) {
        if ignore || !intermediates.is_empty() {
            return;
        }
        match byte {
            b'=' => self.keypad_application = true,
            b'>' => self.keypad_application = false,
            b'c' => *self = Modes::default(), // RIS: the terminal resets everything
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reset_after(chunks: &[&[u8]]) -> String {
        let mut tracker = ModeTracker::default();
        for chunk in chunks {
            tracker.feed(chunk);
        }
        String::from_utf8(tracker.reset_sequence())
            .unwrap()
            .replace('\x1b', "^[")
    }

    #[test]
    fn nothing_switched_on_means_nothing_to_reset() {
        assert_eq!(
            reset_after(&[b"hello \x1b[1;31mred\x1b[0m \xe2\x9c\x93\r\n"]),
            ""
        );
    }

    #[test]
    fn modes_switched_off_again_are_not_reset() {
        let on_off: &[u8] =
            b"\x1b[?1049h\x1b[?2004h\x1b[?25l\x1b[>1u\x1b[?2004l\x1b[<u\x1b[?25h\x1b[?1049l";
        assert_eq!(reset_after(&[on_off]), "");
    }

    #[test]
    fn a_crashed_tui_gets_exactly_its_modes_switched_off() {
        let tui: &[u8] = b"\x1b[?1049h\x1b[?1000;1006h\x1b[?2004h\x1b[?1004h\x1b[?25l\x1b[>4;2m";
        assert_eq!(
            reset_after(&[tui]),
            "^[[?25h^[[?1000l^[[?1004l^[[?1006l^[[?2004l^[[?1049l^[[>4;0m"
        );
    }

    #[test]
    fn kitty_keyboard_pushes_are_popped_per_screen() {
        let seq: &[u8] = b"\x1b[>1u\x1b[?1049h\x1b[>3u\x1b[>1u\x1b[<u\x1b[>5u";
        assert_eq!(reset_after(&[seq]), "^[[<2u^[[?1049l^[[<1u");
        assert_eq!(reset_after(&[b"\x1b[=5;1u"]), "^[[=0;1u");
        assert_eq!(reset_after(&[b"\x1b[=5;1u\x1b[=0;1u"]), "");
    }

    #[test]
    fn sequences_split_across_reads_are_seen() {
        assert_eq!(reset_after(&[b"ab\x1b", b"[?20", b"04", b"h"]), "^[[?2004l");
    }

    #[test]
    fn sequence_text_inside_strings_is_not_a_mode() {
        // A DCS status request and a window title (OSC) carrying mode-like text.
        let dcs: &[u8] = b"\x1bP$q?1049h\x1b\\";
        let osc: &[u8] = b"\x1b]0;[?2004h\x07";
        assert_eq!(reset_after(&[dcs, osc]), "");
    }

    #[test]
    fn full_reset_and_keypad_mode_are_followed() {
        assert_eq!(reset_after(&[b"\x1b[?1049h\x1b[?1h\x1bc"]), "");
        assert_eq!(reset_after(&[b"\x1b=\x1b[?1h"]), "^[[?1l^[>");
    }
}
