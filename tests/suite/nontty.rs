//! Point 9: without a terminal there is no pty and no raw mode; binary data passes
//! untouched and the exit status is kept.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use super::support::bin;
use super::support::Shown;

fn random_bytes(n: usize) -> Vec<u8> {
    let mut data = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut data)
        .unwrap();
    data
}

#[test]
fn binary_data_passes_a_pipe_untouched() {
    let data = random_bytes(1 << 20);
    let mut child = Command::new(bin())
        .args(["-c", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = {
        let data = data.clone();
        std::thread::spawn(move || stdin.write_all(&data).unwrap())
    };
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        out == data,
        "1 MiB of random bytes changed on the way ({} bytes back)",
        out.len()
    );
}

#[test]
fn no_pty_is_opened_and_the_exit_status_is_kept() {
    let out = Command::new(bin())
        .args(["-c", "tty; exit 5"])
        .stdin(Stdio::null())
        .shown();
    assert_eq!(out.status.code(), Some(5));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "not a tty");
}

#[test]
fn signals_and_their_numbers_are_kept_without_a_pty() {
    let out = Command::new(bin())
        .args(["--", "sh", "-c", "kill -SEGV $$"])
        .shown();
    assert_eq!(out.status.code(), Some(139));
}

#[test]
fn pty_always_gives_a_pty_even_to_a_pipe() {
    let out = Command::new(bin())
        .args(["--pty", "always", "-c", "tty >/dev/null && echo IS-A-TTY"])
        .stdin(Stdio::null())
        .shown();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("IS-A-TTY"));
}

#[test]
fn pty_always_passes_piped_input_and_ends_it() {
    let mut child = Command::new(bin())
        .args([
            "--pty",
            "always",
            "--",
            "sh",
            "-c",
            "stty -echo; while read l; do echo \"got:$l\"; done; echo EOF-SEEN",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"one\ntwo\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("got:one") && text.contains("got:two") && text.contains("EOF-SEEN"),
        "{text}"
    );
}

#[test]
fn nothing_survives_a_command_run_without_a_pty() {
    let out = Command::new(bin())
        .args(["-c", "nohup sleep 1003.47 >/dev/null 2>&1 & echo STARTED"])
        .stdin(Stdio::null())
        .shown();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "STARTED");
    assert_eq!(
        super::support::pids_with("sleep 1003.47"),
        Vec::<i32>::new(),
        "the nohup'd job survived"
    );
}

/// Without a pty the child shares our process group; a signal a process sends to
/// sbx-shell alone is passed on, and the child's own exit status is kept.
#[test]
fn a_signal_sent_to_sbx_shell_reaches_the_child_without_a_pty() {
    use std::io::BufRead;
    let mut child = Command::new(bin())
        .args([
            "-c",
            "trap 'echo GOT-TERM; exit 3' TERM; echo READY; while :; do sleep 0.05; done",
        ])
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "GOT-TERM");
    assert_eq!(child.wait().unwrap().code(), Some(3));
}
