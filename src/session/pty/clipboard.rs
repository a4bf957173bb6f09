//! The terminal's clipboard as a channel: the relay's filter of clipboard requests.
//!
//! A program can ask the user's terminal to set the clipboard (OSC 52 with base64 data:
//! paste-jacking into the host shell) or to report it (OSC 52 with `?`: the terminal
//! answers on the program's input). The policy (`config::Clipboard`) decides what passes:
//! `none` drops both, `write` drops the reports, `read-write` passes both. Recognised, by
//! their introducer `ESC ]`, the C1 `U+009D` in UTF-8, or the raw 8-bit C1 byte `0x9D`
//! (where it cannot be part of a UTF-8 character: after an ASCII byte), up to their
//! terminator (BEL, `ESC \\`, `U+009C` or `0x9C`, or CAN, SUB and any other `ESC`, which end
//! a string too). The number is read as xterm, tmux, kitty and screen read it, by its
//! value: `052` and `0052` are 52; spaces in it are ignored (no terminal reads them, so
//! dropping such a request costs nothing), and so are the C0 controls that do not end a
//! string, and DEL, wherever they stand in the head (`ESC ] NUL 5 2 ;`: tmux and xterm's
//! parsers pass over them inside a string, so the request is 52 to them):
//!
//! - `OSC 52 ; sel ; data`: a report request when `data` is `?`, else a write;
//! - `OSC 5522 ; …` (kitty's clipboard protocol, whose requests read as well as write):
//!   passed with `read-write` only;
//! - `OSC 1337 ; Copy=…` and `OSC 1337 ; CopyToClipboard=…` (iTerm2's clipboard writes):
//!   writes.
//!
//! Output: the few bytes of a sequence's head are held until it is known (a terminal shows
//! nothing for an unfinished sequence either), so a request split across reads is
//! recognised; everything else passes untouched, and a read without a possible clipboard
//! head is not even copied (`next_osc` finds heads by `]`, rarer than `ESC`: colours, titles
//! and links cost nothing). Measured: 0.7 ns a byte on escape-dense output, next to the
//! mode tracker's 5.7 (docs/benchmarks.md). Input (the terminal's answers to a report request, which only a
//! dropped request would have made): recognised the same way without holding anything back,
//! since a held `ESC` would delay a keystroke; an answer split right after its first bytes
//! reaches the program as those bytes only.
//! Inside a multiplexer's passthrough the same requests are recognised: screen's (`ESC P`
//! then the request as is) and tmux's (`ESC P tmux;` then the request with each `ESC`
//! doubled, which tmux passes on to the user's terminal where `allow-passthrough` is on);
//! a dropped one leaves an empty passthrough behind.

use std::borrow::Cow;

use crate::policy::config::Clipboard;

const ESC: u8 = 0x1b;
const BEL: u8 = 0x07;
const CAN: u8 = 0x18;
const SUB: u8 = 0x1a;
/// The first byte of U+0080..U+00BF in UTF-8: C1 controls are `0xC2 0x80..0x9F`.
const C1_LEAD: u8 = 0xc2;
const C1_OSC: u8 = 0x9d;
const C1_ST: u8 = 0x9c;
/// The most bytes of a head held before it is decided (`OSC 1337;Copy=`, `OSC 52;cpqs…;?`).
const HEAD_MAX: usize = 24;
/// The most bytes of a number (leading zeros, spaces) held before it is decided: longer,
/// it is dropped (no program writes such a number; a terminal may still read 52 in it).
const NUMBER_MAX: usize = 64;
/// The most bytes of a head held with the controls passed over in it (`ignored`): more,
/// it is dropped.
const HELD_MAX: usize = 256;
/// iTerm2's `OSC 1337` keys that write the clipboard.
const ITERM_WRITES: [&[u8]; 2] = [b"Copy=", b"CopyToClipboard"];

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The program's output, to the user's terminal.
    Output,
    /// The user's terminal's input, to the program.
    Input,
}

/// What a sequence's head says.
#[derive(Debug, PartialEq, Eq)]
enum HeadSays {
    Pass,
    Drop,
    NeedMore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    Ground,
    /// After `ESC` (or `0xC2`, when `c1`): the next byte says whether an OSC begins.
    Intro {
        c1: bool,
    },
    /// Inside an OSC's head (held in `head`), not decided yet.
    Head,
    /// Inside a dropped string: until its terminator.
    Drop,
    /// Inside a dropped string, after `ESC` (or `0xC2`, when `c1`).
    DropIntro {
        c1: bool,
    },
}

/// The filter of one direction of a session.
#[derive(Debug)]
pub struct ClipboardFilter {
    policy: Clipboard,
    direction: Direction,
    state: Scan,
    /// The bytes of the sequence being recognised, from its introducer (held on output).
    held: Vec<u8>,
    /// The OSC's bytes after its introducer, as far as read.
    head: Vec<u8>,
    /// The last byte seen (a raw `0x9D` after a byte ≥ 0x80 is part of a UTF-8 character).
    last: u8,
    /// How many requests were dropped.
    pub dropped: u64,
}

impl ClipboardFilter {
    pub fn new(policy: Clipboard, direction: Direction) -> ClipboardFilter {
        ClipboardFilter {
            policy,
            direction,
            state: Scan::Ground,
            held: Vec::new(),
            head: Vec::new(),
            last: b'\n',
            dropped: 0,
        }
    }

    /// Whether this filter can drop anything at all (with `read-write` on output it cannot).
    pub fn active(&self) -> bool {
        !(self.policy == Clipboard::ReadWrite && self.direction == Direction::Output)
    }

    /// `chunk` with the requests the policy refuses taken out.
    pub fn filter<'a>(&mut self, chunk: &'a [u8]) -> Cow<'a, [u8]> {
        if !self.active() {
            return Cow::Borrowed(chunk);
        }
        // Most reads hold no OSC at all: found without copying, or state, per escape.
        let from = if self.state == Scan::Ground && self.held.is_empty() {
            match next_osc(chunk, 0, self.last) {
                None => {
                    self.last = chunk.last().copied().unwrap_or(self.last);
                    return Cow::Borrowed(chunk);
                }
                Some(at) => at,
            }
        } else {
            0
        };
        let was_holding = !self.held.is_empty();
        let mut out = Vec::with_capacity(chunk.len() + self.held.len());
        out.extend_from_slice(&chunk[..from]);
        if from > 0 {
            self.last = chunk[from - 1];
        }
        let mut at = from;
        while at < chunk.len() {
            if self.state == Scan::Ground {
                let next = next_osc(chunk, at, self.last).unwrap_or(chunk.len());
                out.extend_from_slice(&chunk[at..next]);
                if next > at {
                    self.last = chunk[next - 1];
                }
                at = next;
                if at == chunk.len() {
                    break;
                }
            }
            let byte = chunk[at];
            at += 1;
            self.step(byte, &mut out);
            self.last = byte;
        }
        // On input nothing is held across reads: what was recognised so far goes on.
        if self.direction == Direction::Input {
            out.append(&mut self.held);
        }
        // Bytes are only ever dropped or held: the same length is the same bytes.
        if !was_holding && self.held.is_empty() && out.len() == chunk.len() {
            return Cow::Borrowed(chunk);
        }
        Cow::Owned(out)
    }

    /// What is still held (an unfinished sequence's head), for the end of the session.
    pub fn finish(&mut self) -> Vec<u8> {
        self.state = Scan::Ground;
        self.head.clear();
        std::mem::take(&mut self.held)
    }

    fn step(&mut self, byte: u8, out: &mut Vec<u8>) {
        match self.state {
            Scan::Ground if byte == C1_OSC && self.last < 0x80 => {
                // The raw 8-bit OSC.
                self.held.push(byte);
                self.head.clear();
                self.state = Scan::Head;
            }
            Scan::Ground if byte == ESC || byte == C1_LEAD => {
                self.held.push(byte);
                self.state = Scan::Intro {
                    c1: byte == C1_LEAD,
                };
            }
            Scan::Ground => out.push(byte),
            Scan::Intro { c1 } => {
                let osc = if c1 { byte == C1_OSC } else { byte == b']' };
                if osc {
                    self.held.push(byte);
                    self.head.clear();
                    self.state = Scan::Head;
                } else {
                    self.release(out);
                    // This byte may begin a sequence itself (`ESC ESC ]`).
                    self.step(byte, out);
                }
            }
            Scan::Head => self.step_head(byte, out),
            Scan::Drop => match byte {
                BEL | CAN | SUB | C1_ST => self.state = Scan::Ground,
                ESC => self.state = Scan::DropIntro { c1: false },
                C1_LEAD => self.state = Scan::DropIntro { c1: true },
                _ => {}
            },
            Scan::DropIntro { c1 } => {
                let st = if c1 { byte == C1_ST } else { byte == b'\\' };
                if st {
                    self.state = Scan::Ground;
                } else if !c1 && byte == ESC {
                    // `ESC ESC \`: the doubled ST of a request inside tmux's passthrough.
                } else if c1 {
                    self.state = Scan::Drop;
                } else {
                    // Any other ESC ends the string and begins a sequence of its own.
                    self.state = Scan::Ground;
                    self.step(ESC, out);
                    self.step(byte, out);
                }
            }
        }
    }

    /// A byte of an OSC's head (its number, then the clipboard's parameters): held until
    /// the request is known to pass or to be dropped.
    fn step_head(&mut self, byte: u8, out: &mut Vec<u8>) {
        let ends = matches!(byte, BEL | ESC | CAN | SUB | C1_LEAD | C1_ST);
        let verdict = if ignored(byte) {
            // Passed over by the terminal: held, not read.
            if self.held.len() >= HELD_MAX {
                HeadSays::Drop
            } else {
                HeadSays::NeedMore
            }
        } else if ends {
            // A request that ends in its head: malformed or empty, and not passed
            // when its kind is one the policy refuses.
            match self.verdict(true) {
                HeadSays::NeedMore => HeadSays::Drop,
                other => other,
            }
        } else {
            self.head.push(byte);
            self.verdict(false)
        };
        match verdict {
            HeadSays::NeedMore => self.held.push(byte),
            HeadSays::Pass => {
                self.release(out);
                self.step(byte, out);
            }
            HeadSays::Drop => {
                self.dropped += 1;
                // `ESC ESC ]`: a request inside tmux's passthrough, its ESC doubled;
                // the first ESC goes too, or tmux would read on as passthrough.
                if self.held.first() == Some(&ESC) && out.last() == Some(&ESC) {
                    out.pop();
                }
                self.held.clear();
                self.state = Scan::Drop;
                if ends {
                    self.step(byte, out);
                }
            }
        }
    }

    /// Let the held bytes go on, and the rest of their sequence with them.
    fn release(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.held);
        self.head.clear();
        self.state = Scan::Ground;
    }

    /// The verdict on the OSC head read so far (`ended`: its string ended already).
    fn verdict(&self, ended: bool) -> HeadSays {
        let head = &self.head;
        let (number, rest) = match head.iter().position(|b| *b == b';') {
            Some(i) => (&head[..i], Some(&head[i + 1..])),
            None => (&head[..], None),
        };
        let Some(number) = osc_number(number) else {
            // Not a number: no terminal reads it as a request.
            return HeadSays::Pass;
        };
        if rest.is_none() && !ended {
            return if number.len() > 4 {
                HeadSays::Pass
            } else if head.len() > NUMBER_MAX {
                HeadSays::Drop
            } else {
                HeadSays::NeedMore
            };
        }
        let may_write = self.policy != Clipboard::None;
        let may_read = self.policy == Clipboard::ReadWrite;
        let on_input = self.direction == Direction::Input;
        match (number.as_slice(), rest) {
            (b"52", Some(rest)) => {
                if on_input {
                    // Only an answer to a report request comes this way.
                    return if may_read {
                        HeadSays::Pass
                    } else {
                        HeadSays::Drop
                    };
                }
                let Some(data_at) = rest.iter().position(|b| *b == b';') else {
                    return if ended || rest.len() > HEAD_MAX {
                        HeadSays::Drop
                    } else {
                        HeadSays::NeedMore
                    };
                };
                match rest.get(data_at + 1) {
                    None if !ended => HeadSays::NeedMore,
                    Some(b'?') if !may_read => HeadSays::Drop,
                    _ if !may_write => HeadSays::Drop,
                    _ => HeadSays::Pass,
                }
            }
            (b"5522", Some(_)) => {
                if may_read {
                    HeadSays::Pass
                } else {
                    HeadSays::Drop
                }
            }
            (b"1337", Some(rest)) if !on_input => {
                let writes = ITERM_WRITES.iter().any(|key| rest.starts_with(key));
                let may_become = ITERM_WRITES
                    .iter()
                    .any(|key| rest.len() < key.len() && key.starts_with(rest));
                if may_become && !ended {
                    HeadSays::NeedMore
                } else if writes && !may_write {
                    HeadSays::Drop
                } else {
                    HeadSays::Pass
                }
            }
            _ => HeadSays::Pass,
        }
    }
}

/// An OSC's number as terminals read it: its digits without spaces and leading zeros
/// (`None`: something else than digits and spaces).
fn osc_number(text: &[u8]) -> Option<Vec<u8>> {
    let digits: Vec<u8> = text.iter().copied().filter(|b| *b != b' ').collect();
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let zeros = digits.iter().take_while(|b| **b == b'0').count();
    Some(digits[zeros..].to_vec())
}

/// The heads of the OSCs that may be clipboard requests (after leading zeros and spaces).
const CANDIDATES: [&[u8]; 3] = [b"52;", b"5522;", b"1337;"];

/// Whether a terminal passes over `byte` inside a string: a C0 control that does not end
/// it (BEL, CAN, SUB and ESC do), or DEL.
fn ignored(byte: u8) -> bool {
    (byte < 0x20 && !matches!(byte, BEL | CAN | SUB | ESC)) || byte == 0x7f
}

/// Whether an OSC whose bytes after the introducer begin with `head` (as far as the
/// chunk holds) may be a clipboard request: read as `step_head` reads it, passing over
/// the controls a terminal ignores, leading zeros and spaces.
fn may_be_clipboard(head: &[u8]) -> bool {
    let mut read = [0u8; 5];
    let mut n = 0;
    let mut padding = true;
    for &b in head.iter().take(HELD_MAX) {
        if ignored(b) || (padding && matches!(b, b'0' | b' ')) {
            continue;
        }
        padding = false;
        read[n] = b;
        n += 1;
        if n == read.len() {
            break;
        }
    }
    CANDIDATES.iter().any(|c| {
        let k = c.len().min(n);
        read[..k] == c[..k]
    })
}

/// Where the next OSC that may be a clipboard request begins in `chunk` from `from`
/// (`before`: the byte before `chunk[from]`): an `ESC ]`, `0xC2 0x9D` or a raw `0x9D` after
/// an ASCII byte, followed by a head that `may_be_clipboard`, or by as much of one as the
/// chunk holds; or an `ESC`, `0xC2` or raw OSC that ends the chunk (the rest comes with
/// the next read). Found by the introducers' second bytes, rarer than `ESC`: every other
/// escape, titles and hyperlinks included, is passed over without state.
fn next_osc(chunk: &[u8], from: usize, before: u8) -> Option<usize> {
    let byte_before = |i: usize| if i == 0 { before } else { chunk[i - 1] };
    let mut at = from;
    while at < chunk.len() {
        let Some(i) = memchr::memchr2(b']', C1_OSC, &chunk[at..]) else {
            break;
        };
        let found = at + i;
        let prev = byte_before(found);
        // An `ESC` or `0xC2` before `from` was passed on already: only a raw OSC may begin
        // at `from` itself.
        let start = match chunk[found] {
            b']' if prev == ESC && found > from => Some(found - 1),
            C1_OSC if prev == C1_LEAD && found > from => Some(found - 1),
            C1_OSC if prev < 0x80 => Some(found),
            _ => None,
        };
        if let Some(start) = start {
            if may_be_clipboard(&chunk[found + 1..]) {
                return Some(start);
            }
        }
        at = found + 1;
    }
    let last = chunk.len().checked_sub(1)?;
    (last >= from && matches!(chunk[last], ESC | C1_LEAD)).then_some(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: Clipboard, direction: Direction, chunks: &[&[u8]]) -> (Vec<u8>, u64) {
        let mut f = ClipboardFilter::new(policy, direction);
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend_from_slice(&f.filter(chunk));
        }
        out.extend(f.finish());
        (out, f.dropped)
    }

    fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
        haystack.windows(needle.len()).position(|w| w == needle)
    }

    fn out(policy: Clipboard, text: &[u8]) -> Vec<u8> {
        run(policy, Direction::Output, &[text]).0
    }

    const WRITE: &[u8] = b"a\x1b]52;c;aGVsbG8=\x07b";
    const QUERY: &[u8] = b"a\x1b]52;c;?\x1b\\b";

    #[test]
    fn the_policy_decides_writes_and_reports() {
        assert_eq!(out(Clipboard::None, WRITE), b"ab");
        assert_eq!(out(Clipboard::None, QUERY), b"ab");
        assert_eq!(out(Clipboard::Write, WRITE), WRITE);
        assert_eq!(out(Clipboard::Write, QUERY), b"ab");
        assert_eq!(out(Clipboard::ReadWrite, WRITE), WRITE);
        assert_eq!(out(Clipboard::ReadWrite, QUERY), QUERY);
    }

    #[test]
    fn every_spelling_of_a_request_is_recognised() {
        for request in [
            &b"\x1b]52;;aGk=\x07"[..],
            b"\x1b]52;c;aGk=\x1b\\",
            b"\xc2\x9d52;c;aGk=\xc2\x9c",
            b"\x1b]52;p;aGk=\x18",
            b"\x1b]5522;type=read\x07",
            b"\x1b]1337;Copy=:aGk=\x07",
        ] {
            let mut text = b"<".to_vec();
            text.extend_from_slice(request);
            text.extend_from_slice(b">");
            let got = out(Clipboard::None, &text);
            assert_eq!(got, b"<>", "{:?}", String::from_utf8_lossy(request));
        }
        // An ESC other than ST ends the string and is itself passed on.
        assert_eq!(out(Clipboard::None, b"\x1b]52;c;aGk=\x1b[1mX"), b"\x1b[1mX");
    }

    /// Each introducer, number spelling and terminator a terminal accepts (xterm, kitty,
    /// iTerm2, tmux and screen read the number by its value), for each kind of request.
    #[test]
    fn every_spelling_terminals_read_is_recognised() {
        let introducers: [&[u8]; 3] = [b"\x1b]", b"\xc2\x9d", b"\x9d"];
        let numbers: [(&[u8], &[u8]); 6] = [
            (b"52", b"52"),
            (b"052", b"52"),
            (b"0000052", b"52"),
            (b" 52", b"52"),
            (b"05522", b"5522"),
            (b"01337", b"1337"),
        ];
        let terminators: [&[u8]; 6] = [b"\x07", b"\x1b\\", b"\xc2\x9c", b"\x9c", b"\x18", b"\x1a"];
        for intro in introducers {
            for (number, value) in numbers {
                let body: &[u8] = match value {
                    b"52" => b";c;aGk=",
                    b"5522" => b";type=write",
                    _ => b";CopyToClipboard=",
                };
                for end in terminators {
                    let request = [intro, number, body, end].concat();
                    let text = [&b"<"[..], &request, b">"].concat();
                    let (got, dropped) = run(Clipboard::None, Direction::Output, &[&text]);
                    assert_eq!(
                        (got.as_slice(), dropped),
                        (&b"<>"[..], 1),
                        "{:?}",
                        String::from_utf8_lossy(&request)
                    );
                    // Split anywhere across reads: the same.
                    for split in 1..text.len() {
                        let (a, b) = text.split_at(split);
                        let (got, _) = run(Clipboard::None, Direction::Output, &[a, b]);
                        assert_eq!(got, b"<>", "{request:?} split at {split}");
                    }
                }
            }
        }
        // A number of leading zeros longer than any program writes is dropped too.
        let zeros = [&b"\x1b]"[..], &[b'0'; 80], b"52;c;aGk=\x07"].concat();
        assert_eq!(out(Clipboard::None, &zeros), b"");
    }

    /// The C0 controls a terminal passes over inside a string (all but BEL, CAN, SUB and
    /// ESC), and DEL, anywhere in the head: `ESC ] NUL 52 ;` is 52 to tmux and xterm.
    #[test]
    fn controls_a_terminal_passes_over_in_the_head_are_passed_over_here() {
        let ignored: Vec<u8> = (0u8..0x20)
            .filter(|b| !matches!(*b, BEL | CAN | SUB | ESC))
            .chain([0x7f])
            .collect();
        assert_eq!(ignored.len(), 29);
        for c in ignored {
            let c = [c];
            for request in [
                [&b"\x1b]"[..], &c, b"52;c;aGk=\x07"].concat(),
                [&b"\x1b]5"[..], &c, b"2;c;aGk=\x07"].concat(),
                [&b"\x1b]52"[..], &c, b";c;aGk=\x07"].concat(),
                [&b"\x1b]0"[..], &c, &c, b"52;c;aGk=\x1b\\"].concat(),
                [&b"\xc2\x9d"[..], &c, b"1337;Copy=x\x07"].concat(),
                [&b"\x1b]"[..], &c, b"5522;type=read\x07"].concat(),
            ] {
                let text = [&b"<"[..], &request, b">"].concat();
                let (got, dropped) = run(Clipboard::None, Direction::Output, &[&text]);
                assert_eq!((got.as_slice(), dropped), (&b"<>"[..], 1), "{request:?}");
                for split in 1..text.len() {
                    let (a, b) = text.split_at(split);
                    let (got, _) = run(Clipboard::None, Direction::Output, &[a, b]);
                    assert_eq!(got, b"<>", "{request:?} split at {split}");
                }
            }
            // A report request whose `?` follows a control is a report request.
            let query = [&b"\x1b]52;c;"[..], &c, b"?\x07"].concat();
            assert_eq!(out(Clipboard::Write, &query), b"", "{query:?}");
            // A write stays a write where writes are allowed.
            let write = [&b"\x1b]"[..], &c, b"52;c;aGk=\x07"].concat();
            assert_eq!(out(Clipboard::Write, &write), write, "{write:?}");
            // Answers on input: the same.
            let (got, _) = run(Clipboard::Write, Direction::Input, &[&query]);
            assert_eq!(got, b"", "input {query:?}");
        }
        // Controls without end in a head: held no further than a bound, then dropped.
        let endless = [&b"\x1b]"[..], &[0u8; 100_000], b"52;c;aGk=\x07after"].concat();
        assert_eq!(out(Clipboard::None, &endless), b"after");
        // Other OSCs with controls in them pass as they are.
        let title = b"\x1b]0;ti\x00tle\x07\x1b]\x002;x\x07";
        assert_eq!(out(Clipboard::None, title), title);
    }

    #[test]
    fn look_alikes_pass_untouched() {
        for text in [
            // 0x9D inside a UTF-8 character (U+1F61D) is no introducer.
            "\u{1F61D}52;c;aGk=\u{7}".as_bytes(),
            "\u{75D}1337;Copy=x\u{7}".as_bytes(),
            // Other numbers, other OSCs.
            b"\x1b]520;c;aGk=\x07\x1b]152;c;aGk=\x07\x1b]5a2;c;x\x07",
            b"\x1b]1337;EndCopy\x07\x1b]1337;SetMark\x07\x1b]0052x\x07",
        ] {
            assert_eq!(
                out(Clipboard::None, text),
                text,
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_request_split_anywhere_across_reads_is_still_recognised() {
        for split in 1..WRITE.len() {
            let (a, b) = WRITE.split_at(split);
            let (got, dropped) = run(Clipboard::None, Direction::Output, &[a, b]);
            assert_eq!(got, b"ab", "split at {split}");
            assert_eq!(dropped, 1);
        }
        for split in 1..QUERY.len() {
            let (a, b) = QUERY.split_at(split);
            let (got, _) = run(Clipboard::Write, Direction::Output, &[a, b]);
            assert_eq!(got, b"ab", "split at {split}");
        }
    }

    #[test]
    fn everything_else_passes_untouched_and_uncopied() {
        let text: &[&[u8]] = &[
            b"plain text, no escapes at all",
            b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07 \x1b]8;;https://x\x1b\\link\x1b]8;;\x1b\\",
            "caf\u{e9} \u{b0} \u{a0}\u{a9}".as_bytes(),
            b"\x1b]520;x\x07\x1b]5;x\x07\x1b]1337;SetMark\x07\x1bP+q544e\x1b\\",
            b"\x1b\x1b]0;t\x07",
        ];
        for chunk in text {
            let mut f = ClipboardFilter::new(Clipboard::None, Direction::Output);
            let got = f.filter(chunk);
            assert_eq!(&*got, *chunk, "{:?}", String::from_utf8_lossy(chunk));
            assert!(f.finish().is_empty());
            // Only a possible clipboard head costs a copy; titles, links, colours do not.
            if find(chunk, b"1337;").is_none() {
                assert!(matches!(got, Cow::Borrowed(_)), "{chunk:?}");
            }
        }
        // A sequence's head split off at the end of a read is held, then released whole.
        let (got, _) = run(Clipboard::None, Direction::Output, &[b"x\x1b", b"]0;t\x07"]);
        assert_eq!(got, b"x\x1b]0;t\x07");
        let mut f = ClipboardFilter::new(Clipboard::None, Direction::Output);
        assert_eq!(&*f.filter(b"x\x1b]5"), b"x");
        assert_eq!(f.finish(), b"\x1b]5");
    }

    #[test]
    fn requests_inside_a_multiplexers_passthrough_are_dropped_cleanly() {
        let cases: [(&[u8], &[u8]); 3] = [
            // tmux: ESC doubled inside, terminated by BEL or by a doubled ST.
            (
                b"\x1bPtmux;\x1b\x1b]52;c;aGk=\x07\x1b\\X",
                b"\x1bPtmux;\x1b\\X",
            ),
            (
                b"\x1bPtmux;\x1b\x1b]52;c;aGk=\x1b\x1b\\\x1b\\X",
                b"\x1bPtmux;\x1b\\X",
            ),
            // screen: the request as is inside the DCS.
            (b"\x1bP\x1b]52;c;aGk=\x07\x1b\\X", b"\x1bP\x1b\\X"),
        ];
        for (request, left) in cases {
            assert_eq!(out(Clipboard::None, request), left, "{request:?}");
            assert_eq!(out(Clipboard::Write, request), request, "{request:?}");
        }
        // Other passthrough (an image, a title) is not touched.
        let image: &[u8] = b"\x1bPtmux;\x1b\x1b_Gf=100;AAAA\x1b\x1b\\\x1b\\";
        assert_eq!(out(Clipboard::None, image), image);
    }

    #[test]
    fn a_long_dropped_payload_is_dropped_across_reads() {
        let mut f = ClipboardFilter::new(Clipboard::None, Direction::Input);
        assert_eq!(&*f.filter(b"a\x1b]52;c;QUFB"), b"a");
        assert_eq!(&*f.filter(b"QUFBQUFB"), b"");
        assert_eq!(&*f.filter(b"QUE=\x07b"), b"b");
        let mut f = ClipboardFilter::new(Clipboard::None, Direction::Output);
        assert_eq!(&*f.filter(b"a\x1b]52;c;QUFB"), b"a");
        assert_eq!(&*f.filter(b"QUFBQUFB"), b"");
        assert_eq!(&*f.filter(b"QUE=\x1b"), b"");
        assert_eq!(&*f.filter(b"\\b"), b"b");
    }

    #[test]
    fn on_input_answers_are_dropped_and_keystrokes_never_held() {
        let answer: &[u8] = b"k\x1b]52;c;c2VjcmV0\x07j";
        let (got, dropped) = run(Clipboard::Write, Direction::Input, &[answer]);
        assert_eq!((got.as_slice(), dropped), (&b"kj"[..], 1));
        let (got, _) = run(Clipboard::ReadWrite, Direction::Input, &[answer]);
        assert_eq!(got, answer);
        // Alt-] (ESC ]) then a pause: delivered at once, not held for the next read.
        let mut f = ClipboardFilter::new(Clipboard::None, Direction::Input);
        assert_eq!(&*f.filter(b"\x1b]"), b"\x1b]");
        assert_eq!(&*f.filter(b"x"), b"x");
        let mut f = ClipboardFilter::new(Clipboard::None, Direction::Input);
        assert_eq!(&*f.filter(b"\x1b"), b"\x1b");
        assert_eq!(&*f.filter(b"[A"), b"[A");
    }
}
