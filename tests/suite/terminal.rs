//! sbx-shell on an outer pty that the test opens: the child's process state, raw mode and
//! its restoration on every way out, resizes, byte transparency, mode resets, exit codes,
//! cleanup, job control.

use std::os::unix::process::ExitStatusExt;

use nix::sys::signal::Signal;

use super::support::{
    children_of, find, path_str, pids_with, wait_running, wait_until, Launch, OuterPty, Scratch,
};

/// Point 1: a new session with the inner pty as controlling terminal, sized; default signal
/// dispositions and an empty mask although sbx-shell started with signals ignored and
/// blocked; no fd but 0, 1, 2; the caller's cwd; the open-file limit raised.
#[test]
fn the_child_starts_clean_on_its_own_sized_terminal() {
    let dir = Scratch::new("clean");
    let script = r#"
        echo FDS; ls -1 /proc/$$/fd; echo END-FDS
        set -- $(cut -d' ' -f1,4,5,6,7,8 /proc/$$/stat)
        echo "pid=$1 ppid=$2 pgrp=$3 sid=$4 tty_nr=$5 tpgid=$6"
        echo "size=$(stty size) cwd=$(pwd) tty=$(tty)"
        grep -E '^Sig(Ign|Blk)' /proc/self/status | tr -s '\t ' ' '
        echo "nofile=$(ulimit -n) hard=$(ulimit -Hn)"
        echo "shell=$SHELL"
        echo DONE"#;
    let mut launch = Launch::new(&["--shell", "/bin/sh", "--", "sh", "-c", script]);
    launch.size.ws_row = 33;
    launch.size.ws_col = 111;
    launch.cwd = Some(dir.0.clone());
    launch.ignored = vec![
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGTSTP,
        Signal::SIGTTOU,
        Signal::SIGTTIN,
        Signal::SIGUSR1,
        Signal::SIGWINCH,
        Signal::SIGHUP,
    ];
    launch.blocked = vec![
        Signal::SIGUSR2,
        Signal::SIGTERM,
        Signal::SIGCHLD,
        Signal::SIGWINCH,
    ];
    launch.nofile_soft = Some(256);
    launch.leak_fd = true;
    let mut outer = OuterPty::launch(launch);
    let out = outer.expect("DONE");
    assert!(outer.wait().success(), "{out}");
    let field = |name: &str| -> String {
        let at = out
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("no {name} in:\n{out}"));
        out[at + name.len() + 1..]
            .split(['\r', '\n'])
            .next()
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    let pid = field("pid");
    // A new session, led by the helper's guard (its parent), in which the child has a
    // process group of its own: a group with its parent in the same session is not
    // orphaned, so ^Z can stop it.
    assert_eq!(
        field("pgrp"),
        pid,
        "the child leads its process group:\n{out}"
    );
    assert_eq!(
        field("sid"),
        field("ppid"),
        "the child's session is led by its parent, the guard:\n{out}"
    );
    assert_eq!(
        field("tpgid"),
        pid,
        "the child is the foreground of its own terminal:\n{out}"
    );
    assert_ne!(
        field("tty_nr"),
        "0",
        "the child has a controlling terminal:\n{out}"
    );
    assert!(
        out.contains("size=33 111 "),
        "the inner pty has the outer size:\n{out}"
    );
    assert!(out.contains(&format!("cwd={} ", path_str(&dir.0))), "{out}");
    // bwrap's private /dev shows the inner pty as /dev/console.
    assert!(
        field("tty").starts_with("/dev/pts/") || field("tty") == "/dev/console",
        "{out}"
    );
    assert!(out.contains("SigBlk: 0000000000000000"), "{out}");
    assert!(out.contains("SigIgn: 0000000000000000"), "{out}");
    // Listed before the shell does any redirection of its own (dash keeps saved copies).
    assert!(
        out.contains("FDS\r\n0\r\n1\r\n2\r\nEND-FDS"),
        "only 0, 1, 2 are open in the child:\n{out}"
    );
    assert_eq!(
        field("nofile"),
        field("hard"),
        "soft NOFILE raised to the hard limit:\n{out}"
    );
    assert_ne!(field("nofile"), "256", "{out}");
    assert!(out.contains("shell=/bin/sh\r"), "{out}");
}

/// The child's controlling terminal is the inner pty, never the user's terminal.
#[test]
fn the_child_never_holds_the_outer_terminal() {
    let outer = OuterPty::spawn(&[
        "--",
        "sh",
        "-c",
        "echo \"tty=$(tty)\"; ls -l /proc/$$/fd/ | grep -c pts; sleep 30",
    ]);
    let out = outer.expect("tty=");
    let outer_name = nix::unistd::ttyname(outer.slave_fd()).unwrap();
    let inner = out
        .split("tty=")
        .nth(1)
        .unwrap()
        .split('\r')
        .next()
        .unwrap()
        .to_string();
    let _ = outer.expect("\r\n");
    assert_ne!(
        std::path::Path::new(&inner),
        outer_name,
        "the child got the outer terminal"
    );
}

/// Point 2: raw while running; `stty -g` byte-identical afterwards on each way out, and the
/// exit code each way gives.
#[test]
fn the_outer_termios_is_restored_on_normal_exit_codes_and_child_signals() {
    let cases: [(&str, i32); 3] = [("exit 0", 0), ("exit 7", 7), ("kill -SEGV $$", 139)];
    for (script, code) in cases {
        let script = format!("echo READY; read line; {script}");
        let mut outer = OuterPty::spawn(&["--", "sh", "-c", &script]);
        let before = outer.initial_stty();
        outer.expect("READY");
        outer.wait_raw();
        assert_ne!(
            outer.stty_g(),
            before,
            "raw mode is on while the child runs"
        );
        outer.write(b"go\r");
        let status = outer.wait();
        assert_eq!(status.code(), Some(code), "{script}: {status:?}");
        assert_eq!(outer.stty_g(), before, "{script}: termios restored");
    }
}

/// Fault signals that another process sends count as terminating signals (the supervisor's
/// own faults restore the terminal too: `signals::tests`). Each is sent twice: the first
/// must not be swallowed, nor the second leave the terminal raw.
#[test]
fn the_outer_termios_is_restored_when_sbx_shell_gets_a_terminating_signal() {
    for signal in [
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGABRT,
        Signal::SIGSEGV,
        Signal::SIGBUS,
        Signal::SIGILL,
        Signal::SIGFPE,
    ] {
        // An interactive-like child that ignores none of them but takes a moment.
        let marker = format!("60.{}", signal as i32);
        let script = format!("echo READY; exec sleep {marker}");
        let mut outer = OuterPty::spawn(&["--", "sh", "-c", &script]);
        let before = outer.initial_stty();
        outer.expect("READY");
        outer.wait_raw();
        outer.signal(signal);
        outer.signal(signal);
        let status = outer.wait();
        assert_eq!(
            status.code(),
            Some(128 + signal as i32),
            "{signal}: {status:?}"
        );
        assert_eq!(outer.stty_g(), before, "{signal}: termios restored");
        assert_eq!(
            pids_with(&format!("sleep {marker}")),
            Vec::<i32>::new(),
            "{signal}: the child was ended too"
        );
    }
}

#[test]
fn a_child_that_ignores_the_signal_is_still_ended() {
    let script = "trap '' TERM INT QUIT; echo READY; while :; do sleep 1.0417; done";
    let mut outer = OuterPty::spawn(&["--", "sh", "-c", script]);
    let before = outer.initial_stty();
    outer.expect("READY");
    outer.wait_raw();
    outer.signal(Signal::SIGTERM);
    assert_eq!(outer.wait().code(), Some(143));
    assert_eq!(outer.stty_g(), before);
    wait_until("the stubborn child to die", || {
        pids_with("sleep 1.0417").is_empty().then_some(())
    });
}

/// A panic (the test build uses panic=abort, like release) still restores the terminal.
#[test]
fn the_outer_termios_is_restored_after_a_panic() {
    let mut launch = Launch::new(&["--", "true"]);
    launch.env = vec![("SBX_SHELL_DEBUG_PANIC".into(), "1".into())];
    let mut outer = OuterPty::launch(launch);
    let before = outer.initial_stty();
    let status = outer.wait();
    assert_eq!(
        status.signal(),
        Some(libc::SIGABRT),
        "panic=abort: {status:?}"
    );
    assert!(
        outer.output_text().contains("SBX_SHELL_DEBUG_PANIC"),
        "{}",
        outer.output_text()
    );
    assert_eq!(outer.stty_g(), before, "termios restored by the panic hook");
}

/// Point 2, job control of sbx-shell itself: stopped with SIGTSTP, the terminal is given
/// back as it was; continued with `fg`, raw again and the size that changed meanwhile is
/// passed on. The outer pty runs a job-control shell (bash, `set -m`) so that sbx-shell's
/// process group is not orphaned and can really stop.
#[test]
fn a_stopped_sbx_shell_gives_the_terminal_back_and_takes_it_again() {
    let dir = Scratch::new("tstp");
    let (before, during) = (dir.path("before"), dir.path("during"));
    let child = "trap 'echo SIZE $(stty size)' WINCH; echo READY; while :; do sleep 0.05; done";
    let outer_script = format!(
        "set -m; stty -g > {b}; {sbx} -- bash -c {child}; echo \"STOPPED $?\"; stty -g > {d}; read line; fg",
        b = path_str(&before),
        d = path_str(&during),
        sbx = super::support::bin_quoted(),
        child = super::support::sh_quote(child),
    );
    let outer = OuterPty::launch_program(
        "bash",
        Launch::new(&["--norc", "--noprofile", "-c", &outer_script]),
    );
    outer.expect("READY");
    outer.wait_raw();
    // The outer bash's only child is sbx-shell (whatever the sandbox shows the child as $PPID).
    let sbx_pid = children_of(outer.pid().as_raw())[0];
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(sbx_pid), Signal::SIGTSTP).unwrap();
    outer.expect("STOPPED 148");
    let saved = dir.wait_for_file("before");
    assert_eq!(
        dir.wait_for_file("during"),
        saved,
        "termios while stopped is the original"
    );
    assert!(!outer.is_raw());
    outer.resize(41, 91);
    outer.write(b"continue\n");
    outer.expect("SIZE 41 91");
    outer.wait_raw();
}

/// Point 3: resizes reach the inner pty; a burst of 10 000 SIGWINCH neither hangs sbx-shell
/// nor loses the final size.
#[test]
fn window_size_changes_reach_the_child_even_through_a_signal_storm() {
    // The trap shows that SIGWINCH reaches the child; after the storm the child reads its
    // terminal's size in a loop, because bash runs a trap once for signals that arrive
    // while it runs one, and the point here is the size sbx-shell leaves on the inner pty.
    let child = "trap 'echo SIZE $(stty size)' WINCH; echo READY; \
                 while :; do s=$(stty size); [ \"$s\" = \"$last\" ] || echo \"NOW $s\"; last=$s; sleep 0.05; done";
    let outer = OuterPty::spawn(&["--", "bash", "-c", child]);
    outer.expect("READY");
    outer.resize(50, 132);
    outer.expect("SIZE 50 132");
    for i in 0..10_000u32 {
        if i == 9_000 {
            outer.resize(27, 77);
        }
        outer.signal(Signal::SIGWINCH);
    }
    outer.expect("NOW 27 77");
    // Still responsive after the storm.
    outer.resize(28, 78);
    outer.expect("NOW 28 78");
}

/// Point 4: all 256 byte values and common escape sequences pass unchanged both ways (the
/// clipboard's requests too, when the policy lets them: `--clipboard read-write`).
#[test]
fn the_relay_is_byte_transparent_both_ways() {
    let dir = Scratch::new("bytes");
    let mut payload: Vec<u8> = (0..=255u8).collect();
    payload.extend_from_slice("UTF-8: ✓ 日本語 🎉\n".as_bytes());
    payload.extend_from_slice(b"\x1b[200~pasted\x1b[201~"); // bracketed paste
    payload.extend_from_slice(b"\x1b[97;5u\x1b[1;5A"); // kitty keyboard, modified arrow
    payload.extend_from_slice(b"\x1b[<0;10;5M\x1b[<0;10;5m"); // SGR mouse
    payload.extend_from_slice(b"\x1b]52;c;aGVsbG8=\x07"); // OSC 52 clipboard
    let file = dir.path("payload");
    std::fs::write(&file, &payload).unwrap();
    let received = dir.path("received");
    let script = format!(
        "stty raw -echo; printf START; cat {f}; printf END; head -c {n} > {r}; printf DONE",
        f = path_str(&file),
        n = payload.len(),
        r = path_str(&received)
    );
    let mut outer = OuterPty::spawn(&[
        "--clipboard",
        "read-write",
        "--write",
        dir.0.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let out = outer.expect_bytes(b"END");
    let start = find(&out, b"START").unwrap() + 5;
    assert_eq!(
        &out[start..out.len() - 3],
        &payload[..],
        "output changed on the way out"
    );
    outer.wait_raw();
    outer.write(&payload);
    outer.expect("DONE");
    assert!(outer.wait().success());
    assert_eq!(
        std::fs::read(&received).unwrap(),
        payload,
        "input changed on the way in"
    );
}

/// Point 4: no deadlock when the child floods output while the user types, and no output
/// lost when the child exits right after writing.
#[test]
fn flooding_output_while_typing_neither_deadlocks_nor_loses_the_tail() {
    let script = "stty raw -echo; echo RAW; head -c 3000000 /dev/zero | tr '\\0' x; head -c 20000 > /dev/null; echo; echo TAIL-MARK";
    let mut outer = OuterPty::spawn(&["--", "sh", "-c", script]);
    outer.expect("RAW");
    for _ in 0..20 {
        outer.write(&[b'k'; 1000]);
    }
    outer.expect("TAIL-MARK");
    assert!(outer.wait().success());
    let out = outer.output();
    let after_raw = &out[find(&out, b"RAW").unwrap()..];
    let xs = after_raw.iter().filter(|b| **b == b'x').count();
    assert_eq!(xs, 3_000_000, "every output byte arrived");
}

/// Point 5: modes a crashed TUI left on are switched off at exit — exactly those.
#[test]
fn modes_a_crashed_tui_left_on_are_switched_off_exactly() {
    let on = r"\033[?1049h\033[?2004h\033[?1000h\033[?1006h\033[?1004h\033[?25l\033[>1u\033[>4;2m";
    let script = format!("printf '{on}CRASH'; kill -KILL $$");
    let mut outer = OuterPty::spawn(&["--", "sh", "-c", &script]);
    assert_eq!(outer.wait().code(), Some(137));
    let out = outer.output();
    let tail = &out[find(&out, b"CRASH").unwrap() + 5..];
    assert_eq!(
        String::from_utf8_lossy(tail),
        // The kitty push happened on the alternate screen: popped there, before leaving it.
        "\x1b[<1u\x1b[?25h\x1b[?1000l\x1b[?1004l\x1b[?1006l\x1b[?2004l\x1b[?1049l\x1b[>4;0m"
    );
}

#[test]
fn a_tidy_tui_gets_no_extra_reset() {
    let script = r"printf '\033[?1049h\033[?2004h\033[?25l\033[?25h\033[?2004l\033[?1049lBYE'";
    let mut outer = OuterPty::spawn(&["--", "sh", "-c", script]);
    assert!(outer.wait().success());
    let out = outer.output();
    assert!(out.ends_with(b"BYE"), "{:?}", String::from_utf8_lossy(&out));
}

/// Point 7: when the child ends, nothing it left in the background survives: plain
/// background jobs, nohup'd ones, and setsid'd double forks.
#[test]
fn nothing_the_child_started_survives_it() {
    let script = "sleep 1000.31 & nohup sleep 1001.31 >/dev/null 2>&1 & \
         sh -c 'setsid sleep 1002.31 &'; echo STARTED; exit 3";
    let mut outer = OuterPty::spawn(&["--", "sh", "-c", script]);
    outer.expect("STARTED");
    assert_eq!(outer.wait().code(), Some(3));
    for marker in ["sleep 1000.31", "sleep 1001.31", "sleep 1002.31"] {
        assert_eq!(pids_with(marker), Vec::<i32>::new(), "{marker} survived");
    }
}

/// Point 7: when the outer terminal hangs up, the child gets SIGHUP and sbx-shell exits.
#[test]
fn an_outer_hangup_reaches_the_child_and_ends_sbx_shell() {
    let dir = Scratch::new("hangup");
    let script = format!(
        "trap 'echo HUP > {f}; exit 0' HUP; echo READY; while :; do sleep 0.05; done",
        f = path_str(&dir.path("got"))
    );
    let mut outer = OuterPty::spawn(&[
        "--write",
        dir.0.to_str().unwrap(),
        "--",
        "bash",
        "-c",
        &script,
    ]);
    outer.expect("READY");
    outer.wait_raw();
    outer.hang_up();
    assert_eq!(outer.wait().code(), Some(129));
    assert_eq!(dir.wait_for_file("got"), "HUP\n");
}

/// Point 8: ^C interrupts the foreground job inside, and sbx-shell stays.
#[test]
fn ctrl_c_interrupts_the_inner_job_not_sbx_shell() {
    let mut outer = OuterPty::spawn(&["--", "bash", "--norc", "--noprofile", "-i"]);
    // Markers are computed ($((…))) so that the echo of the typed line cannot match them.
    outer.write(b"PS1='P''> '; echo READY-$((1+1))\r");
    outer.expect("READY-2");
    outer.write(b"sleep 100.83; echo SLEPT-$((1+1))\r");
    wait_running("sleep 100.83");
    let mark = outer.mark();
    outer.write(b"\x03");
    // The inner line discipline flushes typed-ahead input on ^C, as any terminal does:
    // wait for the next prompt before typing.
    outer.expect_from(mark, "P> ");
    outer.write(b"echo ALIVE-$((40+2))\r");
    let out = outer.expect("ALIVE-42");
    assert!(!out.contains("SLEPT-2"), "{out}");
    outer.write(b"exit 4\r");
    assert_eq!(outer.wait().code(), Some(4));
}

/// Point 8: a TUI that stops itself (SIGSTOP to its own pid) can be resumed. Here sbx-shell
/// is a session leader (orphaned, like a tmux pane or a login shell): nobody could continue
/// it, so it continues the child at once.
#[test]
fn a_child_that_stops_itself_is_resumed() {
    let mut outer = OuterPty::spawn(&["--", "sh", "-c", "kill -STOP $$; echo RESUMED"]);
    outer.expect("RESUMED");
    assert!(outer.wait().success());
}

/// Point 4: idle means no wakeups at all — no timers, no polling intervals. Counted, not
/// timed: over a quiet second sbx-shell's context-switch count must not move.
#[test]
fn an_idle_session_never_wakes_up() {
    let outer = OuterPty::spawn(&["--", "sh", "-c", "echo READY; exec sleep 61.837"]);
    outer.expect("READY");
    outer.wait_raw();
    // Settled: the program is the sleep, and sbx-shell has gone quiet (the same count over
    // 20 looks 10 ms apart) after the start-up's last events.
    wait_running("sleep 61.837");
    let switches = || {
        let status = std::fs::read_to_string(format!("/proc/{}/status", outer.pid())).unwrap();
        status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum::<u64>()
    };
    let mut quiet = (0, switches());
    wait_until("sbx-shell to go quiet after start-up", || {
        let now = switches();
        quiet = if now == quiet.1 {
            (quiet.0 + 1, now)
        } else {
            (0, now)
        };
        (quiet.0 >= 20).then_some(())
    });
    let before = switches();
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(
        switches(),
        before,
        "sbx-shell woke up while nothing happened"
    );
}

/// The program's terminal works by every name it learns for it (`tty`: `/dev/console` inside
/// bwrap's private /dev, `/dev/pts/N` under Landlock alone), in every backend: `stty -F
/// "$(tty)"` reads and sets it, and a pager opening it by name gets raw mode (`q` quits
/// without Enter).
#[test]
fn the_terminal_works_by_every_name_and_pagers_page() {
    let dir = Scratch::new("pager");
    let text = dir.path("text");
    let lines: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    std::fs::write(&text, lines).unwrap();
    let text = text.to_str().unwrap();
    let env = vec![("TERM".to_string(), "xterm".to_string())];
    let backends: [&[&str]; 3] = [
        &["--backend", "bwrap"],
        &["--backend", "landlock"],
        &["--backend", "landlock", "--no-nested-pty"],
    ];
    for backend in backends {
        let script = r#"t=$(tty); echo "NAME $t"; s=$(stty -F "$t" -g) && stty -F "$t" "$s" && echo STTY-OK"#;
        let mut args: Vec<&str> = backend.to_vec();
        args.extend(["--", "sh", "-c", script]);
        let mut launch = Launch::new(&args);
        launch.env = env.clone();
        // Not the checkout: Landlock alone refuses a workspace holding a git repository.
        launch.cwd = Some(dir.0.clone());
        let mut outer = OuterPty::launch(launch);
        outer.expect("STTY-OK");
        assert_eq!(outer.wait().code(), Some(0), "{backend:?}");
        let mut args: Vec<&str> = backend.to_vec();
        args.extend(["--", "less", text]);
        let mut launch = Launch::new(&args);
        launch.env = env.clone();
        launch.cwd = Some(dir.0.clone());
        let mut outer = OuterPty::launch(launch);
        outer.expect("line 20");
        outer.write(b"q");
        assert_eq!(outer.wait().code(), Some(0), "{backend:?}: q quit less");
    }
}

/// A program that stops its own process group (as Claude Code, opencode, vim and less do on
/// ^Z) under a job-control shell: the kernel must deliver that SIGTSTP (the program's group
/// is not orphaned), sbx-shell stops with it and gives the terminal back, and `fg` resumes
/// both. Where nobody could resume sbx-shell (a tmux pane command), the program goes on at
/// once: `orphaned_sbx_shell_resumes_a_program_that_stops_its_group`.
#[test]
fn a_program_that_stops_its_group_suspends_sbx_shell_under_a_job_control_shell() {
    let dir = Scratch::new("tstp");
    let script = dir.path("tstp.py");
    std::fs::write(
        &script,
        "import os, signal\nprint('BEFORE-' + str(1+1), flush=True)\nos.killpg(0, signal.SIGTSTP)\nprint('AFTER-' + str(2+2), flush=True)\n",
    )
    .unwrap();
    for backend in ["bwrap", "landlock"] {
        let mut launch = Launch::new(&["--norc", "--noprofile", "-i"]);
        launch.cwd = Some(dir.0.clone());
        let mut outer = OuterPty::launch_program("/bin/bash", launch);
        // Numbered prompts: J1 before the run, J2 after the stop, J3 once it is over.
        outer.write(b"n=0; PS1='J$((n+=1))> '; set -m; echo READY-$((1+1))\r");
        outer.expect("READY-2");
        let line = format!(
            "{} --backend {backend} -- /usr/bin/python3 {}\r",
            super::support::sh_quote(super::support::bin()),
            script.display()
        );
        let mark = outer.mark();
        outer.write(line.as_bytes());
        let out = outer.expect_from(mark, "J2> ");
        let (before, stopped) = (out.find("BEFORE-2"), out.find("Stopped"));
        assert!(
            before.is_some() && stopped.is_some() && before < stopped,
            "{backend}: the program's output, then the stop:\n{out}"
        );
        assert!(
            !out.contains("AFTER-4"),
            "{backend}: the stop was discarded:\n{out}"
        );
        assert!(!outer.is_raw(), "{backend}: the terminal was given back");
        outer.write(b"fg\r");
        outer.expect("AFTER-4");
        outer.expect("J3> ");
        outer.write(b"echo CODE-$?-$((1+1))\r");
        outer.expect("CODE-0-2");
        outer.write(b"exit\r");
        outer.wait();
    }
}

#[test]
fn orphaned_sbx_shell_resumes_a_program_that_stops_its_group() {
    // sbx-shell leads its own session here, as a tmux pane command or a login shell does:
    // it cannot be stopped, so the program goes on at once.
    let mut outer = OuterPty::spawn(&[
        "--",
        "/usr/bin/python3",
        "-c",
        "import os, signal; os.killpg(0, signal.SIGTSTP); print('GOES-' + 'ON')",
    ]);
    outer.expect("GOES-ON");
    assert!(outer.wait().success());
}

/// The program's terminal has a name it can open (`tty`, what GPG_TTY is set from): the
/// name is the terminal itself (same device), sized as sbx-shell sized it, and writing to it
/// shows on the outer terminal. Under bwrap the name is `/dev/console` (bwrap's own /dev has
/// a private devpts, which cannot hold the pty sbx-shell opened outside), elsewhere
/// `/dev/pts/N`.
#[test]
fn the_programs_terminal_has_a_name_it_can_open() {
    if !super::support::require("bwrap", "the bwrap backend") {
        return;
    }
    let script = r#"T=$(tty); same=no; [ "$T" -ef /proc/self/fd/0 ] && same=yes
        echo "name=$T same=$same size=$(stty -F "$T" size)"; echo WROTE-THROUGH-NAME > "$T"; echo DONE"#;
    for (backend, name) in [
        ("bwrap", "/dev/console"),
        ("landlock", "/dev/pts/"),
        ("none", "/dev/pts/"),
    ] {
        let dir = Scratch::new("ttyname");
        let mut launch = Launch::new(&["--backend", backend, "--", "sh", "-c", script]);
        launch.size.ws_row = 33;
        launch.size.ws_col = 111;
        launch.cwd = Some(dir.0.clone());
        let mut outer = OuterPty::launch(launch);
        let out = outer.expect("DONE");
        assert!(outer.wait().success(), "{backend}: {out}");
        assert!(
            out.contains(&format!("name={name}"))
                && out.contains("same=yes size=33 111")
                && out.contains("WROTE-THROUGH-NAME"),
            "{backend}: {out}"
        );
    }
}

/// A shell the user types into starts with one line that says it is sandboxed, by what,
/// and where refusals show; a command, or the same shell with `--quiet`, gets none. Both
/// backends.
#[test]
fn an_interactive_shell_says_once_that_it_is_sandboxed() {
    const LINE: &str = "this shell is sandboxed (";
    let typed = |args: &[&str]| {
        let mut outer = OuterPty::spawn(args);
        outer.write(b"echo READY-$((6*7))\n");
        let out = outer.expect("READY-42");
        outer.write(b"exit\n");
        assert!(outer.wait().success(), "{args:?}: {out}");
        out
    };
    for backend in ["bwrap", "landlock"] {
        if backend == "bwrap" && !super::support::require("bwrap", "the bwrap backend") {
            return;
        }
        let out = typed(&["--backend", backend, "--shell", "/bin/sh"]);
        assert_eq!(out.matches(LINE).count(), 1, "{backend}: {out}");
        assert!(
            out.contains(&format!("{LINE}{backend}")) && out.contains("sbx-shell log --follow"),
            "{backend}: {out}"
        );
        let quiet = typed(&["--backend", backend, "--quiet", "--shell", "/bin/sh"]);
        assert!(!quiet.contains(LINE), "{backend} --quiet: {quiet}");
        let mut outer = OuterPty::spawn(&["--backend", backend, "--", "sh", "-c", "echo DONE"]);
        let out = outer.expect("DONE");
        assert!(outer.wait().success(), "{backend}: {out}");
        assert!(!out.contains(LINE), "{backend}, a command: {out}");
    }
}
