//! The real agent CLIs from the npm registry (pinned and installed by scripts/test.sh,
//! `SBX_AGENTS_BIN`), each driven in tmux with an empty `$HOME`: bare, then under
//! sbx-shell with its own profile. Its first screen matches the bare one on the lines that
//! matter, before and after a resize; ^Z stops it and suspends sbx-shell under a
//! job-control bash, with the terminal restored, and `fg` brings it back (where the agent
//! suspends at all); it exits with the terminal as it was and nothing left running. No
//! network is needed: each shows its onboarding or a login choice first.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::support::{bin, sh_quote, skipped, Scratch, Tmux};

/// Agents take seconds to start (node, a large binary): more than the suite's patience.
const AGENT_PATIENCE: Duration = Duration::from_secs(90);

struct Agent {
    name: &'static str,
    /// A line of its first screen.
    marker: &'static str,
    /// Lines that must be on both first screens.
    key_lines: &'static [&'static str],
    /// Variables for both runs (Claude Code: its documented Bedrock switch, whose
    /// onboarding needs no network; without it, the first screen is a connectivity error).
    env: &'static [(&'static str, &'static str)],
    /// Keys that quit it from its first screen, sent in turn.
    quit: &'static [&'static str],
    /// Whether it stops on ^Z (Gemini CLI does not, bare either).
    suspends: bool,
}

const CLAUDE: Agent = Agent {
    name: "claude",
    marker: "Choose the text style",
    key_lines: &["Let's get started.", "Dark mode", "Light mode"],
    env: &[("CLAUDE_CODE_USE_BEDROCK", "1")],
    quit: &["C-c", "C-c"],
    suspends: true,
};
const GEMINI: Agent = Agent {
    name: "gemini",
    marker: "Do you trust the files in this folder?",
    key_lines: &["1. Trust folder (w)", "3. Don't trust"],
    env: &[],
    quit: &["C-c", "C-c"],
    suspends: false,
};
const CODEX: Agent = Agent {
    name: "codex",
    marker: "Welcome to Codex",
    // Its lower lines: shrunk, codex bare sometimes redraws with its top scrolled away.
    key_lines: &["3. Sign in another way", "Press enter to continue"],
    env: &[],
    quit: &["C-c"],
    suspends: true,
};
const OPENCODE: Agent = Agent {
    name: "opencode",
    marker: "tab agents",
    key_lines: &["Build · Big Pickle OpenCode Zen", "~/w"],
    env: &[],
    quit: &["C-c"],
    suspends: true,
};

/// Where scripts/test.sh installed the agents. Never under /tmp: the sandbox's /tmp is
/// private, so the pinned CLIs would not be found inside and another `claude` on `PATH`
/// would be driven instead.
fn agents_bin() -> Option<PathBuf> {
    match std::env::var_os("SBX_AGENTS_BIN").map(PathBuf::from) {
        Some(dir) if dir.starts_with("/tmp") => panic!(
            "the agent CLIs are under /tmp ({}), which is private inside the sandbox: the tests would drive another copy. Hint: scripts/test.sh moves such a cache to /var/tmp; or set SBX_AGENTS_CACHE outside /tmp",
            dir.display()
        ),
        Some(dir) if dir.join("claude").exists() => Some(dir),
        _ => {
            skipped("SBX_AGENTS_BIN does not name the agent CLIs (scripts/test.sh installs them from the npm registry)");
            None
        }
    }
}

/// Wait until the pane shows `needle`, with the agents' patience.
fn expect(tmux: &Tmux, needle: &str) -> String {
    tmux.expect_within(needle, AGENT_PATIENCE)
}

/// The visible screen, trimmed, without blank lines, the home's own name replaced.
fn screen(tmux: &Tmux, home: &Path) -> Vec<String> {
    let name = home.file_name().unwrap().to_str().unwrap();
    tmux.run(&["capture-pane", "-p", "-t", "0"])
        .lines()
        .map(|l| l.trim().replace(name, "HOME"))
        .filter(|l| !l.is_empty())
        .collect()
}

/// The sandboxed screen shows every key line and nearly every line of the bare one
/// (agents vary a tip or a placeholder between runs).
fn assert_same_screen(agent: &Agent, bare: &[String], boxed: &[String], when: &str) {
    for key in agent.key_lines {
        for (which, lines) in [("bare", bare), ("sandboxed", boxed)] {
            assert!(
                lines.iter().any(|l| l.contains(key)),
                "{} {when}: {which} lacks {key:?}:\n{}",
                agent.name,
                lines.join("\n")
            );
        }
    }
    let shared = bare.iter().filter(|l| boxed.contains(l)).count();
    assert!(
        shared * 10 >= bare.len() * 8,
        "{} {when}: only {shared} of {} lines match\nbare:\n{}\nsandboxed:\n{}",
        agent.name,
        bare.len(),
        bare.join("\n"),
        boxed.join("\n")
    );
}

/// Whether the screens are alike by `assert_same_screen`'s rule.
fn same_screen(agent: &Agent, bare: &[String], boxed: &[String]) -> bool {
    let keys = agent.key_lines.iter().all(|key| {
        [bare, boxed]
            .iter()
            .all(|lines| lines.iter().any(|l| l.contains(key)))
    });
    let shared = bare.iter().filter(|l| boxed.contains(l)).count();
    keys && shared * 10 >= bare.len() * 8
}

/// Wait until both screens are alike, polling rather than sleeping a fixed time; then
/// assert it, naming the last screens.
fn expect_same_screen(agent: &Agent, bare: (&Tmux, &Path), boxed: (&Tmux, &Path), when: &str) {
    let start = std::time::Instant::now();
    loop {
        let (b, s) = (screen(bare.0, bare.1), screen(boxed.0, boxed.1));
        if same_screen(agent, &b, &s) || start.elapsed() > AGENT_PATIENCE {
            assert_same_screen(agent, &b, &s, when);
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Until the screen stays the same for 300 ms (the agent done redrawing), `at_most` long.
fn settle(tmux: &Tmux, at_most: Duration) {
    let start = std::time::Instant::now();
    let mut last = tmux.capture();
    while start.elapsed() < at_most {
        std::thread::sleep(Duration::from_millis(300));
        let now = tmux.capture();
        if now == last {
            return;
        }
        last = now;
    }
}

/// Live processes whose environment holds `needle` (each run's HOME is its own).
fn pids_with_env(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| super::support::alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        })
        .collect()
}

/// sbx-shell, granted the agents' directory: it lies in the real user's cache, and for root
/// in root's home, a root-only directory that a session with another `$HOME` cannot read.
fn sbx(agents: &Path) -> String {
    let installed = agents.parent().and_then(Path::parent).unwrap_or(agents);
    format!(
        "{} --read {}",
        sh_quote(bin()),
        sh_quote(installed.to_str().unwrap())
    )
}

fn environment(agents: &Path, home: &Path, agent: &Agent) -> String {
    let mut env = format!(
        "env -i HOME={} TERM=xterm-256color PATH={}:/usr/bin:/bin LANG=C.UTF-8",
        sh_quote(home.to_str().unwrap()),
        sh_quote(agents.to_str().unwrap())
    );
    for (k, v) in agent.env {
        env.push_str(&format!(" {k}={}", sh_quote(v)));
    }
    env
}

/// The agent bare and under sbx-shell with `backend` (`auto`: bwrap here).
fn drive(agent: &Agent, backend: &str) {
    let _machine = super::support::needing_the_machine();
    let Some(agents) = agents_bin() else { return };
    let dir = Scratch::new(&format!("agent-{}-{backend}", agent.name));
    // Outside /tmp (private inside the sandbox) and outside the test's private HOME.
    let base = super::support::run_dir(&format!("sbx-agent-{}-{backend}", agent.name));
    let (bare_home, boxed_home) = (base.join("bare"), base.join("boxed"));
    for home in [&bare_home, &boxed_home] {
        std::fs::create_dir_all(home.join("w")).unwrap();
    }

    // Bare: the reference.
    let bare = Tmux::start(
        &format!(
            "cd {} && exec {} {}",
            sh_quote(bare_home.join("w").to_str().unwrap()),
            environment(&agents, &bare_home, agent),
            agent.name
        ),
        100,
        30,
    );

    // Sandboxed, from a job-control bash, as a user would start it; it starts while the
    // bare one does.
    let mut boxed_env = environment(&agents, &boxed_home, agent);
    if backend == "docker" {
        // The engine scripts/test.sh starts, as the client finds one (`engines.rs`).
        let Ok(host) = std::env::var("SBX_TEST_DOCKER_HOST") else {
            super::support::skipped(
                "the docker backend needs the engine scripts/test.sh starts (SBX_TEST_DOCKER_HOST)",
            );
            return;
        };
        boxed_env.push_str(&format!(" DOCKER_HOST={}", sh_quote(&host)));
    }
    let boxed = Tmux::start(
        &format!(
            "cd {} && exec {} PS1='J> ' bash --norc --noprofile -i",
            sh_quote(boxed_home.join("w").to_str().unwrap()),
            boxed_env,
        ),
        100,
        30,
    );
    expect(&boxed, "J>");
    let stty_file = dir.path("stty");
    let stty = |tmux: &Tmux, tag: &str| -> String {
        let _ = std::fs::remove_file(&stty_file);
        tmux.type_line(&format!(
            "stty -g > {}; echo {tag}-$((6*7))",
            sh_quote(stty_file.to_str().unwrap())
        ));
        expect(tmux, &format!("{tag}-42"));
        std::fs::read_to_string(&stty_file).unwrap()
    };
    let before = stty(&boxed, "BEFORE");
    boxed.type_line(&format!(
        "clear; {} --backend {backend} -- {}",
        sbx(&agents),
        agent.name
    ));
    expect(&bare, agent.marker);
    expect(&boxed, agent.marker);
    let (bare_at, boxed_at) = ((&bare, bare_home.as_path()), (&boxed, boxed_home.as_path()));
    expect_same_screen(agent, bare_at, boxed_at, "first screen");

    // A resize reaches it: both redraw at the new size, alike.
    bare.resize(80, 24);
    boxed.resize(80, 24);
    // Time for both to redraw (tmux reflows the old screen at once: a poll could pass
    // before either agent drew anything at the new size).
    std::thread::sleep(Duration::from_millis(2500));
    expect(&boxed, agent.marker);
    expect_same_screen(agent, bare_at, boxed_at, "after a resize to 80x24");

    if agent.suspends {
        boxed.send_keys(&["C-z"]);
        expect(&boxed, "Stopped");
        expect(&boxed, "J>");
        assert_eq!(
            stty(&boxed, "SUSPENDED"),
            before,
            "{}: the terminal is not restored while suspended",
            agent.name
        );
        boxed.type_line("fg");
        expect(&boxed, agent.marker);
        settle(&boxed, Duration::from_millis(1500));
    }

    for key in agent.quit {
        bare.send_keys(&[key]);
        boxed.send_keys(&[key]);
        std::thread::sleep(Duration::from_millis(300));
    }
    let bare_status = bare.wait_dead();
    let home_var = format!("HOME={}", boxed_home.display());
    // Typed only once the sandboxed run has ended (an agent slow to quit would read it).
    super::support::wait_until(&format!("{} to quit", agent.name), || {
        (pids_with_env(&home_var).len() <= 1).then_some(())
    });
    boxed.type_line("echo EXIT-$?-DONE-$((6*7))");
    let pane = expect(&boxed, "-DONE-42");
    let tail: Vec<&str> = pane
        .lines()
        .filter(|l| !l.trim().is_empty())
        .rev()
        .take(12)
        .collect();
    assert!(
        pane.contains(&format!("EXIT-{bare_status}-DONE-42")),
        "{}: not the bare run's exit status {bare_status}: {tail:?}",
        agent.name
    );
    assert_eq!(
        stty(&boxed, "AFTER"),
        before,
        "{}: the terminal",
        agent.name
    );
    // The bash that started it is the only one left with that HOME.
    super::support::wait_until(&format!("{} to leave nothing running", agent.name), || {
        (pids_with_env(&home_var).len() <= 1).then_some(())
    });
    // Its state was made in its own directories, nothing else in the home.
    drop(bare);
    drop(boxed);
    // What the bare run left running (codex starts an app-server daemon that outlives
    // it; sbx-shell ends the sandboxed run's): ended here, or every run of the suite
    // leaves it behind.
    let bare_var = format!("HOME={}", bare_home.display());
    for pid in pids_with_env(&bare_var) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn claude_code_starts_resizes_suspends_and_exits_as_bare() {
    drive(&CLAUDE, "auto");
}

#[test]
fn gemini_cli_starts_resizes_and_exits_as_bare() {
    drive(&GEMINI, "auto");
}

#[test]
fn codex_starts_resizes_suspends_and_exits_as_bare() {
    drive(&CODEX, "auto");
}

#[test]
fn opencode_starts_resizes_suspends_and_exits_as_bare() {
    drive(&OPENCODE, "auto");
}

// The same under Landlock alone (issue 16): the backend `auto` falls back to where
// bubblewrap cannot run, with each agent's shipped profile.

#[test]
fn claude_code_under_landlock_alone_runs_as_bare() {
    drive(&CLAUDE, "landlock");
}

#[test]
fn gemini_cli_under_landlock_alone_runs_as_bare() {
    drive(&GEMINI, "landlock");
}

#[test]
fn codex_under_landlock_alone_runs_as_bare() {
    drive(&CODEX, "landlock");
}

#[test]
fn opencode_under_landlock_alone_runs_as_bare() {
    drive(&OPENCODE, "landlock");
}

// The same in a Docker container (its network allow-list through the proxy in the
// container's own network), with each agent's shipped profile.

#[test]
fn claude_code_in_a_docker_container_runs_as_bare() {
    drive(&CLAUDE, "docker");
}

#[test]
fn gemini_cli_in_a_docker_container_runs_as_bare() {
    drive(&GEMINI, "docker");
}

#[test]
fn codex_in_a_docker_container_runs_as_bare() {
    drive(&CODEX, "docker");
}

#[test]
fn opencode_in_a_docker_container_runs_as_bare() {
    drive(&OPENCODE, "docker");
}

/// Claude Code saves its settings file through a lock directory and temporary files beside
/// it: under sbx-shell (its profile moves the file into the writable `~/.claude`) the
/// onboarding and the folder-trust decision of one session are there in the next. And a
/// home where Claude Code ran bare starts from what it saved (the profile's seed).
#[test]
fn claude_code_keeps_what_it_saved_between_sessions() {
    let Some(agents) = agents_bin() else { return };
    let _machine = super::support::needing_the_machine();
    let base = super::support::run_dir("sbx-agent-claude-state");
    let home = base.join("home");
    std::fs::create_dir_all(home.join("w")).unwrap();
    let session = || {
        Tmux::start(
            &format!(
                "cd {} && exec {} {} -- claude",
                sh_quote(home.join("w").to_str().unwrap()),
                environment(&agents, &home, &CLAUDE),
                sbx(&agents)
            ),
            100,
            30,
        )
    };
    let quit = |tmux: &Tmux| {
        for key in CLAUDE.quit {
            tmux.send_keys(&[key]);
            std::thread::sleep(Duration::from_millis(300));
        }
        tmux.wait_dead();
    };
    let first = session();
    expect(&first, CLAUDE.marker);
    std::thread::sleep(Duration::from_millis(1000));
    first.send_keys(&["Enter"]);
    expect(&first, "Security notes");
    std::thread::sleep(Duration::from_millis(1000));
    first.send_keys(&["Enter"]);
    expect(&first, "Yes, I trust this folder");
    std::thread::sleep(Duration::from_millis(1000));
    first.send_keys(&["Down"]);
    expect(&first, "❯ Yes, I trust this folder");
    first.send_keys(&["Enter"]);
    expect(&first, "/effort");
    std::thread::sleep(Duration::from_millis(1000));
    quit(&first);
    let saved = std::fs::read_to_string(home.join(".claude/.claude.json")).unwrap();
    assert!(
        saved.contains("\"hasCompletedOnboarding\": true"),
        "{saved}"
    );
    assert!(
        saved.contains("\"hasTrustDialogAccepted\": true"),
        "{saved}"
    );
    assert!(
        !home.join(".claude.json").exists(),
        "written outside ~/.claude"
    );

    let second = session();
    let pane = expect(&second, "/effort");
    assert!(!pane.contains(CLAUDE.marker), "onboarding again:\n{pane}");
    assert!(
        !pane.contains("trust this folder"),
        "trust asked again:\n{pane}"
    );
    quit(&second);

    // Seeded: a home where Claude Code ran bare (its file in ~/.claude.json) starts there.
    let seeded = base.join("seeded");
    std::fs::create_dir_all(seeded.join("w")).unwrap();
    std::fs::write(
        seeded.join(".claude.json"),
        saved.replace(home.to_str().unwrap(), seeded.to_str().unwrap()),
    )
    .unwrap();
    let third = Tmux::start(
        &format!(
            "cd {} && exec {} {} -- claude",
            sh_quote(seeded.join("w").to_str().unwrap()),
            environment(&agents, &seeded, &CLAUDE),
            sbx(&agents)
        ),
        100,
        30,
    );
    let pane = expect(&third, "/effort");
    assert!(!pane.contains(CLAUDE.marker), "onboarding again:\n{pane}");
    quit(&third);
    assert!(seeded.join(".claude/.claude.json").is_file());
    let _ = std::fs::remove_dir_all(&base);
}
