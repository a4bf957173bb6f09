//! sbx-shell as a tmux pane command and as tmux's `default-command`: resize, ^C, ^Z/fg/bg
//! in an inner bash, a self-stopping TUI, exit status, kill-pane, and the pane closing.

use super::support::{
    alive, bin_quoted, path_str, pids_with, require, sh_quote, wait_running, wait_until, Scratch,
    Tmux,
};

fn sbx(args: &str) -> String {
    format!("{} {args}", bin_quoted())
}

/// Point 3: after `tmux resize-window`, `stty size` inside reports the new size and a
/// program's SIGWINCH handler fires.
#[test]
fn tmux_resize_reaches_the_child() {
    if !require("tmux", "sbx-shell as a tmux pane") {
        return;
    }
    let child = "trap 'echo WINCH $(stty size)' WINCH; echo READY $(stty size); while :; do sleep 0.05; done";
    let tmux = Tmux::start(&sbx(&format!("-- bash -c {}", sh_quote(child))), 100, 30);
    tmux.expect("READY 30 100");
    tmux.resize(120, 40);
    tmux.expect("WINCH 40 120");
}

/// Point 8: ^C, ^Z, `bg`, `fg` in an inner interactive bash; exit status through the pane.
#[test]
fn job_control_inside_a_pane() {
    if !require("tmux", "job control inside a tmux pane") {
        return;
    }
    let tmux = Tmux::start(&sbx("-- bash --norc --noprofile -i"), 100, 30);
    tmux.type_line("PS1='P''> '; echo READY-$((1+1))");
    tmux.expect("READY-2");
    tmux.type_line("sleep 100.61; echo NOT-INTERRUPTED-$((1+1))");
    wait_running("sleep 100.61");
    tmux.send_keys(&["C-c"]);
    tmux.expect("^C\nP>");
    tmux.type_line("echo AFTER-CTRL-C-$((1+1))");
    let pane = tmux.expect("AFTER-CTRL-C-2");
    assert!(!pane.contains("NOT-INTERRUPTED-2"), "{pane}");
    tmux.type_line("sleep 101.61");
    wait_running("sleep 101.61");
    tmux.send_keys(&["C-z"]);
    tmux.expect("Stopped");
    tmux.type_line("bg");
    tmux.expect("sleep 101.61 &");
    tmux.type_line("jobs");
    tmux.expect("Running");
    tmux.type_line("fg");
    wait_running("sleep 101.61");
    tmux.send_keys(&["C-c"]);
    tmux.expect("^C\nP>");
    tmux.type_line("echo BACK-$((1+1))");
    tmux.expect("BACK-2");
    tmux.type_line("exit 9");
    assert_eq!(tmux.wait_dead(), 9);
}

/// Point 8: a TUI that stops itself (as some agents do on ^Z) is resumed in a pane, whose
/// process group is orphaned: nothing else could ever continue it.
#[test]
fn a_self_stopping_tui_is_resumed_in_a_pane() {
    if !require("tmux", "a self-stopping TUI in a tmux pane") {
        return;
    }
    let tmux = Tmux::start(
        &sbx("-- sh -c 'kill -STOP $$; echo RESUMED; exit 6'"),
        80,
        24,
    );
    tmux.expect("RESUMED");
    assert_eq!(tmux.wait_dead(), 6);
}

/// Point 6 through tmux: the pane's exit status is the child's, 128+N for a signal.
#[test]
fn the_pane_exit_status_is_the_childs() {
    if !require("tmux", "exit status in a tmux pane") {
        return;
    }
    let tmux = Tmux::start(&sbx("-- sh -c 'kill -SEGV $$'"), 80, 24);
    assert_eq!(tmux.wait_dead(), 139);
}

/// Point 7: tmux kill-pane hangs up the pane; the child gets SIGHUP and sbx-shell exits.
#[test]
fn kill_pane_hangs_up_the_child_and_ends_sbx_shell() {
    if !require("tmux", "tmux kill-pane") {
        return;
    }
    let dir = Scratch::new("kill-pane");
    let child = format!(
        "trap 'echo HUP > {f}; exit 0' HUP; echo READY; while :; do sleep 0.05; done",
        f = path_str(&dir.path("got"))
    );
    let tmux = Tmux::start(
        &sbx(&format!(
            "--write {} -- bash -c {}",
            sh_quote(dir.0.to_str().unwrap()),
            sh_quote(&child)
        )),
        80,
        24,
    );
    tmux.expect("READY");
    let sbx_pid = tmux.pane_pid();
    tmux.run(&["kill-pane", "-t", "0"]);
    assert_eq!(dir.wait_for_file("got"), "HUP\n");
    wait_until("sbx-shell to exit after kill-pane", || {
        (!alive(sbx_pid)).then_some(())
    });
}

/// As `default-command` (every new pane and window supervised): the pane's shell runs in the
/// sandbox at the pane's size, follows a resize, takes ^C and ^Z, ends with its status, and
/// leaves nothing running; a window without remain-on-exit closes.
#[test]
fn as_default_command_every_pane_is_supervised() {
    if !require("tmux", "sbx-shell as tmux's default-command") {
        return;
    }
    let dir = Scratch::new("default-command");
    let config = dir.path("tmux.conf");
    std::fs::write(
        &config,
        format!(
            "set -g default-shell /bin/sh\n\
             set -g default-command {}\n\
             set -g remain-on-exit on\n",
            sh_quote(&sbx("--shell /bin/bash"))
        ),
    )
    .unwrap();
    let tmux = Tmux::start_configured(&config, 90, 25);
    tmux.type_line("PS1='D''> '; echo IN-$SBX_SHELL-$SBX_SANDBOX $(stty size)");
    let pane = tmux.expect("IN-1-");
    assert!(!pane.contains("IN-1-none"), "{pane}");
    tmux.expect(" 25 90");
    tmux.resize(100, 30);
    tmux.type_line("echo SIZE $(stty size)");
    tmux.expect("SIZE 30 100");
    tmux.type_line("sleep 102.61; echo NOT-INTERRUPTED-$((1+1))");
    wait_running("sleep 102.61");
    tmux.send_keys(&["C-c"]);
    tmux.expect("^C\nD>");
    tmux.type_line("sleep 103.61");
    wait_running("sleep 103.61");
    tmux.send_keys(&["C-z"]);
    tmux.expect("Stopped");
    // `wait`: bash learns of the job's end before `exit` looks for stopped jobs (without
    // it, a busy machine made bash refuse the first `exit`).
    tmux.type_line("kill -KILL %1; wait %1; echo KILLED-$((1+1))");
    tmux.expect("KILLED-2");
    tmux.type_line("exit 5");
    assert_eq!(tmux.wait_dead(), 5);
    let pane = tmux.capture();
    assert!(!pane.contains("NOT-INTERRUPTED-2"), "{pane}");
    wait_until("nothing left of the pane's session", || {
        (pids_with("sleep 102.61").is_empty() && pids_with("sleep 103.61").is_empty()).then_some(())
    });

    // A new window without remain-on-exit: `exit` closes it, and tmux keeps running.
    tmux.run(&["set-option", "-g", "remain-on-exit", "off"]);
    tmux.run(&["new-window", "-d", "-n", "closing"]);
    tmux.run(&["send-keys", "-t", ":closing", "exit", "Enter"]);
    wait_until("the window to close", || {
        (!tmux
            .run(&["list-windows", "-F", "#{window_name}"])
            .contains("closing"))
        .then_some(())
    });
}

/// As tmux's `default-command` or pane command, sbx-shell follows the program in the
/// foreground: `#{pane_current_path}` after `cd` (what the usual split binding opens in) and
/// `#{pane_current_command}` while a command runs, as bare — on both backends. A private
/// directory of the session (its `/tmp` under bwrap) is not the host's, and not followed.
#[test]
fn pane_formats_follow_the_program_as_bare() {
    if !require("tmux", "pane formats") || !require("bwrap", "the bwrap backend") {
        return;
    }
    let dir = Scratch::new("follow");
    let (ws, sub) = (dir.path("ws"), dir.path("ws/sub dir"));
    std::fs::create_dir_all(&sub).unwrap();
    let shell = "bash --norc --noprofile -i";
    let runs = [
        ("bare", shell.to_string()),
        ("bwrap", sbx(&format!("--backend bwrap -- {shell}"))),
        ("landlock", sbx(&format!("--backend landlock -- {shell}"))),
    ];
    for (what, command) in runs {
        let tmux = Tmux::start(
            &format!("cd {} && exec {command}", sh_quote(path_str(&ws))),
            100,
            30,
        );
        tmux.type_line("PS1='P''> '; cd 'sub dir'; echo IN-$((1+1))");
        tmux.expect("IN-2");
        let path = wait_until(&format!("{what}: the pane's path"), || {
            let now = tmux.display("#{pane_current_path}");
            (now == path_str(&sub)).then_some(now)
        });
        assert_eq!(path, path_str(&sub), "{what}");
        tmux.type_line("sleep 77.5");
        wait_running("sleep 77.5");
        wait_until(&format!("{what}: the pane's command"), || {
            (tmux.display("#{pane_current_command}") == "sleep").then_some(())
        });
        tmux.send_keys(&["C-c"]);
        tmux.type_line("cd /tmp; echo TMP-$((1+1))");
        tmux.expect("TMP-2");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let path = tmux.display("#{pane_current_path}");
        match what {
            // Under bwrap /tmp is the session's own: the host's is not where it is.
            "bwrap" => assert_eq!(path, path_str(&sub), "{what}"),
            _ => assert_eq!(path, "/tmp", "{what}"),
        }
        tmux.type_line("exit 0");
        assert_eq!(tmux.wait_dead(), 0, "{what}");
    }
}
