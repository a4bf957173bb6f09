//! Protections inside writable trees, attacked as a program would route around them:
//! renaming an ancestor, creating what is missing (the workspace at `$HOME`), git's
//! indirections checked by running the host's git afterwards, symlinks flipped while
//! sessions start, and the end-of-session report. bwrap backend, as root and as nobody.
//!
//! Every attack runs beside its control: the same script under `--backend none` gets
//! through, so a pass shows that the sandbox stopped it.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::sandbox::{assert_lines, chown_tree, tools_present, Lab, User, NOBODY};
use super::support::{require, Shown};

const USERS: [User; 2] = [User::Root, User::Nobody];

/// `git ARGS` on the host in `dir`, as the lab's user, with the lab's home.
pub(super) fn host_git(lab: &Lab, dir: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("git");
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", &lab.home)
        .env("PATH", "/usr/bin:/bin")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null());
    if lab.user == User::Nobody {
        cmd.uid(NOBODY).gid(NOBODY);
    }
    cmd.shown()
}

/// The host's `git commit --allow-empty` in `dir` (what runs its hooks).
fn host_commit(lab: &Lab, dir: &Path) -> std::process::Output {
    let identity = ["-c", "user.name=t", "-c", "user.email=t@t"];
    let args = [
        &identity[..],
        &["commit", "-q", "--allow-empty", "-m", "host"],
    ]
    .concat();
    host_git(lab, dir, &args)
}

/// A real repository with one commit in the lab's workspace (owned by the lab's user).
pub(super) fn repo_lab(name: &str, user: User) -> Lab {
    let lab = Lab::new(name, user, false);
    for args in [
        &["init", "-q", "-b", "main", "."][..],
        &["add", "README"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        setup_git(&lab, &lab.ws, args);
    }
    if user == User::Nobody {
        chown_tree(&lab.dir, NOBODY);
    }
    lab
}

/// `git ARGS` in `dir` as root, preparing a lab (whatever owns the directory).
fn setup_git(lab: &Lab, dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "safe.directory=*"])
        .args(args)
        .current_dir(dir)
        .env("HOME", &lab.home)
        .shown();
    assert!(out.status.success());
}

/// A script the attacker leaves in the workspace, that git would run: it marks `$LAB_OUT`.
pub(super) fn evil_script(lab: &Lab, mark: &str) -> String {
    format!(
        "printf '#!/bin/sh\\ntouch {out}/{mark}\\n' > {ws}/evil-{mark}.sh; chmod +x {ws}/evil-{mark}.sh; ",
        out = lab.outside.display(),
        ws = lab.ws.display(),
    )
}

pub(super) fn fsmonitor(lab: &Lab, mark: &str) -> String {
    format!(
        "[core]\\n\\tfsmonitor = {}/evil-{mark}.sh\\n",
        lab.ws.display()
    )
}

/// Renaming an ancestor of a protected or denied path (`.git`, `.claude`, a directory above
/// a `--deny` path) and planting a new one in its place: each rename is refused, on both
/// backends (bwrap's pins; alone, the guard refuses renaming what is left out of a carved
/// workspace, or what holds it), so the host's git runs nothing. Control: every rename goes
/// through and the host's git runs the planted command.
#[test]
fn renaming_an_ancestor_moves_no_protection_away() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("ancestor", user);
            fs::create_dir_all(lab.ws.join("a/b")).unwrap();
            fs::write(lab.ws.join("a/b/secret.txt"), "CANARY-denied\n").unwrap();
            fs::create_dir_all(lab.ws.join(".claude")).unwrap();
            fs::write(lab.ws.join(".claude/settings.json"), "{}\n").unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let script = format!(
                "{evil}\
                 mv .git .git-moved && mkdir .git && cp -r .git-moved/. .git/ && printf '{cfg}' >> .git/config && echo GIT-RENAMED; \
                 mv a c && echo DENIED-RENAMED; \
                 mv .claude .claude-moved && mkdir .claude && echo '{{\"hooks\":{{}}}}' > .claude/settings.json && echo CLAUDE-RENAMED; \
                 echo DONE",
                evil = evil_script(&lab, "ancestor"),
                cfg = fsmonitor(&lab, "ancestor"),
            );
            let what = format!("{} {backend}", lab.what(backend));
            let deny: &[&str] = &["--deny", "./a/b/secret.txt"];
            let (code, out, err) = lab.sh(backend, deny, &script);
            assert_eq!(code, 0, "{what}: {err}");
            assert_lines(&out, &["DONE"], &what);
            let status = host_git(&lab, &lab.ws, &["status", "--short"]);
            let pwned = lab.outside.join("ancestor").exists();
            let secret_moved = lab.ws.join("c/b/secret.txt").exists();
            if backend == "none" {
                // Control: every rename went through, and the host's git ran the command.
                assert_lines(
                    &out,
                    &["GIT-RENAMED", "DENIED-RENAMED", "CLAUDE-RENAMED"],
                    &what,
                );
                assert!(
                    pwned,
                    "{what}: control: git did not run the planted fsmonitor"
                );
                assert!(secret_moved, "{what}: control");
            } else {
                for line in ["GIT-RENAMED", "DENIED-RENAMED", "CLAUDE-RENAMED"] {
                    assert!(!out.lines().any(|l| l == line), "{what}: {line}\n{out}");
                }
                assert!(
                    !pwned,
                    "{what}: the host's git ran a command the sandbox planted"
                );
                assert!(status.status.success(), "{what}");
                assert!(
                    !secret_moved && lab.ws.join("a/b/secret.txt").exists(),
                    "{what}"
                );
                assert_eq!(
                    fs::read_to_string(lab.ws.join(".claude/settings.json")).unwrap(),
                    "{}\n",
                    "{what}"
                );
            }
        }
    }
}

/// What a login shell's session (workspace `$HOME`) tries to plant, by path relative to
/// the home directory: each would run code outside later.
const HOME_PLANTS: &[&str] = &[
    ".bash_login",
    ".bashrc",
    ".profile",
    ".gitconfig",
    ".config/git/config",
    ".local/bin/ls",
    "bin/ls",
    ".config/autostart/evil.desktop",
    ".config/systemd/user/evil.service",
    ".config/sbx-shell/config.json",
    ".config/sbx-shell/profiles/evil.json",
    ".local/state/sbx-shell/sessions.jsonl",
    ".ssh/rc",
];

#[test]
fn a_home_workspace_keeps_what_runs_code_unwritable_and_ordinary_files_writable() {
    if !tools_present() || !require("vim", "editing a file at the top of a sealed home") {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "none"] {
            let lab = Lab::new("homews", user, false);
            fs::create_dir_all(lab.home.join("docs")).unwrap();
            fs::write(lab.home.join("notes.txt"), "notes\n").unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let mut script = String::from("cd \"$HOME\"; ");
            for plant in HOME_PLANTS {
                let dir = Path::new(plant).parent().unwrap().display().to_string();
                script.push_str(&format!(
                    "(mkdir -p './{dir}' && echo \"echo PLANTED-$((6*7))\" >> './{plant}') 2>/dev/null && echo 'PLANTED {plant}'; "
                ));
            }
            // vim edits a file at the top of the home (its backup cannot be made beside it
            // in a sealed home: the private home takes it).
            script.push_str(
                "TERM=xterm script -qc \"vim -c 'normal Avim' -c wq notes.txt\" /dev/null >/dev/null 2>&1; grep -q notesvim notes.txt && echo VIM-OK; \
                 echo more >> notes.txt && echo NOTES-OK; echo new > docs/new.txt && echo DOCS-OK; mkdir docs/sub && echo MKDIR-OK; \
                 echo todo > todo.txt && echo TOP-FILE-OK; mkdir notes && echo TOP-DIR-OK; \
                 export GIT_CONFIG_GLOBAL=/dev/null; git init -q src && git clone -q src clone && echo TOP-CLONE-OK; \
                 mv todo.txt .todo 2>/dev/null || echo DOT-RENAME-REFUSED; echo DONE",
            );
            let mut cmd = lab.command(backend, &["--workspace"]);
            cmd.arg(&lab.home).args(["-c", &script]);
            let out = cmd.shown();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let what = format!("{} {backend}", lab.what(backend));
            assert!(out.status.success(), "{what}");
            assert_lines(
                &text,
                &[
                    "VIM-OK",
                    "NOTES-OK",
                    "DOCS-OK",
                    "MKDIR-OK",
                    "TOP-FILE-OK",
                    "TOP-DIR-OK",
                    "TOP-CLONE-OK",
                    "DONE",
                ],
                &what,
            );
            if backend == "none" {
                assert!(!text.contains("DOT-RENAME-REFUSED"), "{what}: control");
            } else {
                assert_lines(&text, &["DOT-RENAME-REFUSED"], &what);
            }
            for plant in HOME_PLANTS {
                let planted = fs::read_to_string(lab.home.join(plant))
                    .is_ok_and(|t| t.contains("echo PLANTED-42"));
                if backend == "none" {
                    assert!(planted, "{what}: control could not plant {plant}");
                } else {
                    assert!(!planted, "{what}: planted {plant}\n{text}");
                }
            }
        }
    }
}

/// Every git indirection — a nested repository's config, the main config, a worktree's
/// `.git` pointer, `config.worktree`, a hook — checked by running the host's git
/// afterwards, while ordinary work goes on: each write is refused by the helper's guard,
/// on bwrap and on Landlock alone. Control: the host's git runs every planted command.
#[test]
fn git_cannot_be_turned_against_the_host_through_any_repository() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("gitind", user);
            let ws = &lab.ws;
            // A nested repository, a linked worktree and a submodule-style pointer file.
            fs::create_dir_all(ws.join("sub")).unwrap();
            setup_git(&lab, &ws.join("sub"), &["init", "-q", "."]);
            setup_git(&lab, ws, &["worktree", "add", "-q", "wt"]);
            fs::write(ws.join(".gitignore"), "sub/\nwt/\nevil-*\nelsewhere/\n").unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let cfg = |mark: &str| fsmonitor(&lab, mark);
            let script = format!(
                "{e1}{e2}{e3}{e4}{e5}\
                 printf '{c1}' >> sub/.git/config && echo NESTED; \
                 printf '{c2}' >> .git/config && echo MAIN; \
                 git init -q elsewhere && printf '{c3}' >> elsewhere/.git/config; printf 'gitdir: {ws}/elsewhere/.git\\n' > wt/.git && echo POINTER; \
                 printf '{c4}' >> .git/worktrees/wt/config.worktree && echo WT-CONFIG; \
                 echo '../../nowhere/objects' > .git/objects/info/alternates && echo ALTERNATES; \
                 printf '#!/bin/sh\\ntouch {out}/hook\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && echo HOOK; \
                 echo ok >> README && git -c user.name=t -c user.email=t@t commit -qam work && echo COMMIT-OK; \
                 git branch topic && git checkout -q topic && git checkout -q main && git merge -q topic && echo BRANCH-OK; \
                 git log --oneline | head -1 >/dev/null && git status --short >/dev/null && echo STATUS-OK; \
                 echo DONE",
                e1 = evil_script(&lab, "nested"),
                e2 = evil_script(&lab, "main"),
                e3 = evil_script(&lab, "pointer"),
                e4 = evil_script(&lab, "wtconfig"),
                e5 = "",
                c1 = cfg("nested"),
                c2 = cfg("main"),
                c3 = cfg("pointer"),
                c4 = cfg("wtconfig"),
                ws = ws.display(),
                out = lab.outside.display(),
            );
            let (code, out, err) = lab.sh(backend, &[], &script);
            let what = format!("{} {backend}", lab.what(backend));
            assert_eq!(code, 0, "{what}: {err}");
            assert_lines(
                &out,
                &["COMMIT-OK", "BRANCH-OK", "STATUS-OK", "DONE"],
                &what,
            );
            // The host's git, afterwards, in each repository; a checkout runs the hook.
            for dir in [ws.join("sub"), ws.clone(), ws.join("wt")] {
                host_git(&lab, &dir, &["status", "--short"]);
            }
            host_git(&lab, ws, &["checkout", "-q", "topic"]);
            let marks = ["nested", "main", "pointer", "hook"];
            let fired: Vec<&str> = marks
                .iter()
                .copied()
                .filter(|m| lab.outside.join(m).exists())
                .collect();
            if backend == "none" {
                assert_eq!(fired, marks, "{what}: control: {out}");
                assert_lines(
                    &out,
                    &["NESTED", "MAIN", "POINTER", "ALTERNATES", "HOOK"],
                    &what,
                );
            } else if backend == "landlock" {
                // Refused by the guard as under bwrap: the configs, the worktree's
                // pointer, a hook, and what was missing at the start (`config.worktree`).
                // `alternates` (objects borrowed: data, never code) is git work.
                assert!(
                    fired.is_empty(),
                    "{what}: the host's git ran {fired:?}\n{out}"
                );
                for line in ["NESTED", "MAIN", "POINTER", "WT-CONFIG", "HOOK"] {
                    assert!(!out.lines().any(|l| l == line), "{what}: {line}\n{out}");
                }
                let wt = fs::read_to_string(ws.join("wt/.git")).unwrap();
                assert!(wt.contains(".git/worktrees/wt"), "{what}: {wt}");
                let config_worktree = ws.join(".git/worktrees/wt/config.worktree");
                assert!(
                    !fs::read_to_string(&config_worktree).is_ok_and(|c| c.contains("fsmonitor")),
                    "{what}"
                );
                assert!(!ws.join(".git/hooks/post-checkout").exists(), "{what}");
                assert_lines(&out, &["ALTERNATES"], &what);
                assert!(!config_worktree.exists(), "{what}: config.worktree made");
            } else {
                assert!(
                    fired.is_empty(),
                    "{what}: the host's git ran {fired:?}\n{out}"
                );
                for line in ["NESTED", "MAIN", "POINTER", "HOOK"] {
                    assert!(!out.lines().any(|l| l == line), "{what}: {line}\n{out}");
                }
                assert_lines(&out, &["ALTERNATES"], &what);
            }
        }
    }
}

#[test]
fn the_end_of_a_session_names_what_it_planted() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        let lab = repo_lab("report", user);
        // What the program plants in git or as a project file is refused when made; what
        // nothing judges — an executable in a `$PATH` directory inside the workspace — is
        // named at the end. A new repository is no plant, and a host tool's `.mcp.json`,
        // written while the session runs, is the host's: left in place, not named.
        let script = format!(
            "{evil}git init -q fresh && printf '{cfg}' >> fresh/.git/config; \
             git init -q plain; \
             mkdir -p .vscode && echo '{{}}' > .vscode/tasks.json; \
             mkdir -p bin && printf '#!/bin/sh\\n' > bin/git && chmod +x bin/git; \
             for i in $(seq 200); do test -e go && break; sleep 0.05; done; \
             sleep 0.3; echo DONE",
            evil = evil_script(&lab, "fresh"),
            cfg = fsmonitor(&lab, "fresh"),
        );
        let host = {
            let ws = lab.ws.clone();
            std::thread::spawn(move || {
                for _ in 0..400 {
                    if ws.join("plain/.git/config").exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                fs::write(ws.join("mcp.tmp"), "{\"mcpServers\":{}}").unwrap();
                fs::rename(ws.join("mcp.tmp"), ws.join(".mcp.json")).unwrap();
                fs::write(ws.join("go"), "").unwrap();
            })
        };
        let path = format!("{}/bin:/usr/bin:/bin", lab.ws.display());
        let out = lab
            .command("bwrap", &["-c", &script])
            .env("PATH", &path)
            .shown();
        let (code, out, err) = (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        host.join().unwrap();
        let what = lab.what("bwrap");
        assert_eq!(code, 0, "{what}: {err}");
        assert_lines(&out, &["DONE"], &what);
        let ws = lab.ws.display();
        assert!(
            err.contains("fresh/.git/config: Permission denied")
                && err.contains("cannot create directory '.vscode': Permission denied")
                && !lab.ws.join(".vscode").exists(),
            "{what}: {err}"
        );
        let named = format!("{ws}/bin/git (new executable in $PATH)");
        assert!(err.contains(&named), "{what}: {named} not named:\n{err}");
        assert!(
            !err.contains("plain/.git/config") && !err.contains(".mcp.json"),
            "{what}: {err}"
        );
        assert_eq!(
            fs::read_to_string(lab.ws.join(".mcp.json")).unwrap(),
            "{\"mcpServers\":{}}",
            "{what}: the host's file was touched"
        );
        let log =
            fs::read_to_string(lab.home.join(".local/state/sbx-shell/sessions.jsonl")).unwrap();
        let last = log.lines().last().unwrap();
        assert!(
            last.contains("bin/git (new executable in $PATH)"),
            "{what}: {last}"
        );
        assert!(!lab.outside.join("fresh").exists(), "{what}");
    }
}

/// Before Linux 5.14 the guard cannot judge names. `setarch --uname-2.6` makes this
/// kernel's `uname` answer 2.6 to sbx-shell, which asks it so: what exists of what would
/// run code outside is held by read-only mounts; what does not exist yet can be made, and
/// one line at the start says so (with its fix and `--require names`), the end of the
/// session names what was made; `--require names` refuses to run, and so does Landlock
/// alone, which has no mounts. Controls: the same session on this kernel's own release
/// refuses the new names too; bare, everything is written.
#[test]
fn before_5_14_what_exists_is_mounted_read_only_and_what_is_open_is_said() {
    if !tools_present() || !require("setarch", "a kernel release before 5.14 (--uname-2.6)") {
        return;
    }
    let script = "echo x >> .git/config && echo WROTE config; \
                  echo x > .git/hooks/pre-commit && echo WROTE hook; \
                  echo x > .vscode/tasks.json && echo WROTE vscode; \
                  echo '{}' > .mcp.json && echo MADE mcp; \
                  git init -q fresh && printf '#!/bin/sh\\n' > fresh/.git/hooks/post-checkout && echo MADE fresh-hook; \
                  echo DONE";
    for user in USERS {
        let fresh_lab = || {
            let lab = repo_lab("old-kernel", user);
            fs::create_dir_all(lab.ws.join(".vscode")).unwrap();
            fs::write(lab.ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            lab
        };
        let lab = fresh_lab();
        let bin = lab.bin();
        let old = [
            std::ffi::OsStr::new("setarch"),
            std::ffi::OsStr::new("--uname-2.6"),
            bin.as_os_str(),
        ];
        let run = |lab: &Lab, before: &[&std::ffi::OsStr], backend: &str, args: &[&str]| {
            let out = lab
                .command_through(before, backend, &[args, &["-c", script]].concat())
                .shown();
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            (out.status.code(), text(&out.stdout), text(&out.stderr))
        };
        let what = lab.what("bwrap, uname 2.6");
        let config = fs::read(lab.ws.join(".git/config")).unwrap();
        let (code, out, err) = run(&lab, &old, "bwrap", &[]);
        assert_eq!(code, Some(0), "{what}: {err}");
        assert_lines(&out, &["MADE mcp", "MADE fresh-hook", "DONE"], &what);
        assert!(
            !out.contains("WROTE"),
            "{what}: existing ones are read-only: {out}"
        );
        assert_eq!(
            fs::read(lab.ws.join(".git/config")).unwrap(),
            config,
            "{what}"
        );
        let start = err
            .lines()
            .find(|l| l.contains("is older than 5.14"))
            .unwrap_or_else(|| panic!("{what}: no start line: {err}"));
        assert!(
            start.contains("Linux 2.6.") && start.contains("--require names"),
            "{what}: {start}"
        );
        // Missing: .claude/commands, settings.json, settings.local.json, .idea, .mcp.json.
        assert!(
            start.contains("/ws/.claude/commands and 4 more"),
            "{what}: names what is open: {start}"
        );
        assert!(
            err.contains("left code that runs outside")
                && err.contains(".mcp.json")
                && err.contains("fresh/.git/hooks/post-checkout"),
            "{what}: the end names what was made: {err}"
        );
        // Refused before anything runs.
        for (backend, args, says) in [
            (
                "bwrap",
                &["--require", "names"][..],
                "the names layer is required",
            ),
            ("landlock", &[][..], "Landlock alone cannot keep"),
        ] {
            let lab = fresh_lab();
            let what = lab.what(&format!("{backend} {args:?}, uname 2.6"));
            let (code, out, err) = run(&lab, &old, backend, args);
            assert_eq!(code, Some(1), "{what}: {out} {err}");
            assert!(
                !out.contains("DONE") && err.contains(says) && err.contains("Hint: "),
                "{what}: {err}"
            );
            assert!(!lab.ws.join(".mcp.json").exists(), "{what}");
        }
        // Controls: this kernel's own release judges the names; bare writes everything.
        let lab = fresh_lab();
        let (code, out, err) = run(&lab, &[bin.as_os_str()], "bwrap", &["--require", "names"]);
        let what = lab.what("bwrap");
        assert_eq!(code, Some(0), "{what}: {err}");
        assert_lines(&out, &["DONE"], &what);
        assert!(
            !out.contains("WROTE") && !out.contains("MADE"),
            "{what}: {out}"
        );
        assert!(!err.contains("older than 5.14"), "{what}: {err}");
        let lab = fresh_lab();
        let (code, out, _) = run(&lab, &old, "none", &[]);
        assert_eq!(code, Some(0));
        for line in [
            "WROTE config",
            "WROTE hook",
            "WROTE vscode",
            "MADE mcp",
            "MADE fresh-hook",
        ] {
            assert!(out.contains(line), "control: {line}: {out}");
        }
    }
    // `doctor` says it in its names check; on this kernel's own release, nothing is open.
    let bin = Lab::new("old-kernel-doctor", User::Root, false).bin();
    for (before, says) in [
        (
            &["setarch", "--uname-2.6"][..],
            "warn  names            Linux 2.6.",
        ),
        (&[][..], "ok    names            Linux "),
    ] {
        let out = Command::new(before.first().copied().unwrap_or(bin.to_str().unwrap()))
            .args(before.iter().skip(1))
            .args(before.first().map(|_| bin.as_os_str()))
            .arg("doctor")
            .shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines().any(|l| l.starts_with(says)),
            "{before:?}: {text}"
        );
    }
}

/// What no mount can refuse — a protected name that did not exist, a directory moved in
/// as `.claude` or `.vscode`, a command-running key written into a new repository's
/// config, a hook in one, a `.git` symlink re-pointed — is refused when made (the guard
/// makes every name and does every writing open for the program): nothing is there while
/// the session runs; ordinary work in a new repository goes on.
#[test]
fn what_no_mount_can_refuse_is_refused_when_made() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("guard", user);
            let ws = &lab.ws;
            // A directory whose `.git` is a symlink to the workspace's git directory, and
            // a repository where the walk does not look (node_modules) to re-point it at.
            fs::create_dir_all(ws.join("linked")).unwrap();
            std::os::unix::fs::symlink("../.git", ws.join("linked/.git")).unwrap();
            fs::create_dir_all(ws.join("node_modules/evil")).unwrap();
            setup_git(&lab, &ws.join("node_modules/evil"), &["init", "-q", "."]);
            let mut cfg = fs::OpenOptions::new()
                .append(true)
                .open(ws.join("node_modules/evil/.git/config"))
                .unwrap();
            std::io::Write::write_all(
                &mut cfg,
                fsmonitor(&lab, "link")
                    .replace("\\n", "\n")
                    .replace("\\t", "\t")
                    .as_bytes(),
            )
            .unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let script = format!(
                "{e1}{e2}{e3}\
                 echo '{{\"mcpServers\":{{}}}}' > .mcp.json; \
                 mkdir x && echo '{{\"hooks\":{{}}}}' > x/settings.json && mv x .claude; \
                 mkdir v && echo '{{}}' > v/tasks.json && mv v .vscode; \
                 git init -q fresh && printf '{c1}' >> fresh/.git/config; \
                 mkdir -p deep/a && git init -q deep/a/b && printf '#!/bin/sh\\ntouch {out}/hook\\n' > deep/a/b/.git/hooks/pre-commit; chmod +x deep/a/b/.git/hooks/pre-commit; \
                 ln -sfn ../node_modules/evil/.git linked/.git; \
                 sleep 0.5; \
                 for p in .mcp.json .claude/settings.json .vscode deep/a/b/.git/hooks/pre-commit; do test -e $p && echo STILL $p; done; \
                 grep -q fsmonitor fresh/.git/config && echo STILL fresh-config; \
                 test \"$(readlink linked/.git)\" = ../.git || echo STILL linked; \
                 git init -q work && cd work && echo hi > f && git add f && git -c user.name=t -c user.email=t@t commit -qm one && echo WORK-OK; \
                 echo DONE",
                e1 = evil_script(&lab, "fresh"),
                e2 = "",
                e3 = evil_script(&lab, "link"),
                c1 = fsmonitor(&lab, "fresh"),
                out = lab.outside.display(),
            );
            let (code, out, err) = lab.sh(backend, &[], &script);
            let what = format!("{} {backend}", lab.what(backend));
            assert_eq!(code, 0, "{what}: {err}");
            assert_lines(&out, &["WORK-OK", "DONE"], &what);
            // The host's git, afterwards, where each would run.
            for dir in [ws.join("fresh"), ws.clone(), ws.join("linked")] {
                host_git(&lab, &dir, &["status", "--short"]);
            }
            host_commit(&lab, &ws.join("deep/a/b"));
            let marks = ["fresh", "link", "hook"];
            let fired: Vec<&str> = marks
                .iter()
                .copied()
                .filter(|m| lab.outside.join(m).exists())
                .collect();
            let still = out.lines().filter(|l| l.starts_with("STILL")).count();
            if backend == "none" {
                assert_eq!(fired, marks, "{what}: control: {out}");
                assert_eq!(still, 6, "{what}: control: {out}");
                assert!(ws.join(".mcp.json").exists() && ws.join(".claude/settings.json").exists());
            } else {
                assert!(
                    fired.is_empty(),
                    "{what}: the host's git ran {fired:?}\n{out}"
                );
                assert_eq!(
                    still, 0,
                    "{what}: still there while the session ran:\n{out}"
                );
                for gone in [
                    ".mcp.json",
                    ".claude/settings.json",
                    ".vscode",
                    "deep/a/b/.git/hooks/pre-commit",
                ] {
                    assert!(!ws.join(gone).exists(), "{what}: {gone} is there");
                }
                assert_eq!(
                    fs::read_link(ws.join("linked/.git")).unwrap(),
                    Path::new("../.git"),
                    "{what}"
                );
            }
            // Ordinary work in a repository made during the session stays.
            let log = host_git(&lab, &ws.join("work"), &["log", "--oneline"]);
            assert!(
                String::from_utf8_lossy(&log.stdout).contains("one"),
                "{what}"
            );
        }
    }
}

/// A program racing the guard in a repository it made: tight loops writing a hook, and a
/// command-running key into the repository's config, are refused at every write (the
/// guard makes every name and does every writing open for the program), so a host process
/// watching without pause never sees the hook, and the session goes on. Control: without
/// the sandbox both loops write, the hook is there, and the host's git runs both.
#[test]
fn a_program_racing_the_guard_is_refused_at_every_write() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("race", user);
            let ws = &lab.ws;
            // As fast as a loop that forks nothing; for the seconds given.
            fs::write(
                ws.join("plant.py"),
                "import os, sys, time\nend = time.time() + float(sys.argv[1])\nn = 0\nwhile time.time() < end:\n    try:\n        fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)\n        os.write(fd, sys.argv[3].encode().decode('unicode_escape').encode())\n        os.close(fd)\n        n += 1\n    except OSError:\n        pass\nprint(sys.argv[4], n)\n",
            )
            .unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let hook = ws.join("fresh/.git/hooks/post-checkout");
            let watching = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
            let probe = {
                let (hook, watching) = (hook.clone(), watching.clone());
                std::thread::spawn(move || {
                    let (mut seen, mut looks) = (0u64, 0u64);
                    while watching.load(std::sync::atomic::Ordering::Relaxed) {
                        looks += 1;
                        seen += u64::from(hook.symlink_metadata().is_ok());
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    }
                    (seen, looks)
                })
            };
            let script = format!(
                "{evil}git init -q fresh && cd fresh && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m one && cd .. && \
                 {py} plant.py 1 fresh/.git/hooks/post-checkout '#!/bin/sh\ntouch {out}/race\n' HOOKS; \
                 {py} plant.py 1 fresh/.git/config '{cfg}' CONFIGS; echo EXIT $?",
                evil = evil_script(&lab, "config"),
                py = super::sandbox::PYTHON,
                out = lab.outside.display(),
                cfg = fsmonitor(&lab, "config"),
            );
            let (code, out, err) = lab.sh(backend, &[], &script);
            watching.store(false, std::sync::atomic::Ordering::Relaxed);
            let (seen, looks) = probe.join().unwrap();
            let what = format!("{} {backend}", lab.what(backend));
            eprintln!("{what}: the hook was there at {seen} of {looks} looks");
            host_git(&lab, &ws.join("fresh"), &["checkout", "-q", "-b", "other"]);
            host_git(&lab, &ws.join("fresh"), &["status", "--short"]);
            let fired: Vec<&str> = ["race", "config"]
                .into_iter()
                .filter(|m| lab.outside.join(m).exists())
                .collect();
            let count = |name: &str| {
                out.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            };
            assert_eq!(code, 0, "{what}: {out}\n{err}");
            assert!(out.contains("EXIT 0"), "{what}: {out}");
            if backend == "none" {
                assert!(count("HOOKS").unwrap_or(0) > 0, "{what}: control: {out}");
                assert!(count("CONFIGS").unwrap_or(0) > 0, "{what}: control: {out}");
                assert!(hook.exists() && seen > 0, "{what}: control");
                assert_eq!(fired, ["race", "config"], "{what}: control: {out}");
                continue;
            }
            assert_eq!(count("HOOKS"), Some(0), "{what}: {out}\n{err}");
            assert_eq!(count("CONFIGS"), Some(0), "{what}: {out}\n{err}");
            assert_eq!(seen, 0, "{what}: the hook was seen from outside");
            assert!(fired.is_empty(), "{what}: the host's git ran {fired:?}");
        }
    }
}

/// Inside, a `commondir` written, renamed or linked into place, or written before its
/// directory becomes a git directory, is refused, and the session goes on. From outside
/// (a host tool writing into the tree while a session runs), nothing is undone or counted:
/// a `commondir` written once, a `.mcp.json` written again and again, and the session
/// runs to its end. Control: everything lands, and the host's git runs the command the
/// other config names.
#[test]
fn commondir_plants_are_refused_and_the_hosts_writes_left_alone() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("commondir", user);
            let ws = &lab.ws;
            fs::create_dir_all(ws.join("common/objects")).unwrap();
            fs::create_dir_all(ws.join("common/refs")).unwrap();
            let config = fsmonitor(&lab, "common")
                .replace("\\n", "\n")
                .replace("\\t", "\t");
            fs::write(ws.join("common/config"), config).unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let script = format!(
                "{}echo ../common > .git/commondir && echo PLANTED; \
                 echo ../common > cd.tmp && mv cd.tmp .git/commondir && echo MOVED; \
                 ln -s ../common .git/commondir && echo LINKED; \
                 mkdir -p g/objects g/refs && echo ../../common > g/commondir && echo 'ref: refs/heads/main' > g/HEAD && echo SLIPPED; \
                 echo AFTER",
                evil_script(&lab, "common")
            );
            let (code, out, err) = lab.sh(backend, &[], &script);
            let what = format!("{} {backend}", lab.what(backend));
            host_git(&lab, ws, &["status", "--short"]);
            let fired = lab.outside.join("common").exists();
            let commondir = ws.join(".git/commondir");
            assert_eq!(code, 0, "{what}: {err}");
            if backend == "none" {
                assert_lines(&out, &["PLANTED", "SLIPPED", "AFTER"], &what);
                assert!(commondir.exists(), "{what}: control");
                assert!(fired, "{what}: control: the host's git ran nothing");
                continue;
            }
            assert_lines(&out, &["AFTER"], &what);
            for refused in ["PLANTED", "MOVED", "LINKED", "SLIPPED"] {
                assert!(
                    !out.lines().any(|l| l == refused),
                    "{what}: {refused}\n{out}"
                );
            }
            assert!(!commondir.exists() && !ws.join("g/HEAD").exists(), "{what}");
            assert!(!fired, "{what}: the host's git ran the planted command");
            // From outside: written once (commondir), or again and again (.mcp.json): the
            // host's own work, which the session neither undoes nor counts — it runs to its
            // end, and what the host wrote stays.
            for (place, content, again) in [
                (".git/commondir", "../common\n", false),
                (".mcp.json", "{}", true),
            ] {
                let path = ws.join(place);
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let host = {
                    let (path, stop, started) = (path.clone(), stop.clone(), ws.join("started"));
                    std::thread::spawn(move || {
                        while !started.exists() && !stop.load(std::sync::atomic::Ordering::Relaxed)
                        {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                        }
                        for _ in 0..2000 {
                            let _ = fs::write(&path, content);
                            if !again || stop.load(std::sync::atomic::Ordering::Relaxed) {
                                break;
                            }
                            std::thread::sleep(std::time::Duration::from_micros(200));
                        }
                    })
                };
                let (code, out, err) = lab.sh(backend, &[], "touch started; sleep 1; echo LATE");
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                host.join().unwrap();
                let _ = fs::remove_file(ws.join("started"));
                assert_eq!(code, 0, "{what}: {place}: {out}\n{err}");
                assert!(out.contains("LATE"), "{what}: {place}: {out}");
                assert_eq!(
                    fs::read_to_string(&path).ok().as_deref(),
                    Some(content),
                    "{what}: {place}: the host's file was touched\n{err}"
                );
                assert!(!err.contains("this session was ended"), "{what}: {err}");
                let _ = fs::remove_file(&path);
            }
        }
    }
}

/// Every way to make a name that would run code outside, tried where it is missing:
/// written, through a symlink (dangling, or to a directory), renamed and linked into
/// place, a directory moved in, a temporary file given the name, in a repository made
/// during the session too — each refused when made (EACCES), so none ever exists; while
/// the names ordinary work makes keep working, as the program would make them (its umask,
/// a FIFO, `/dev/stdout`, a temporary file given a name, a symlink, `mkdir .claude`, a
/// second name of an ordinary file, `tar`). Control: without the sandbox every plant lands.
#[test]
fn names_that_would_run_code_outside_are_refused_when_made() {
    if !tools_present() {
        return;
    }
    let plants: &[(&str, &str)] = &[
        ("MCP", "echo '{}' > .mcp.json"),
        ("MCP-LINK", "ln -s .mcp.json m && echo '{}' > m"),
        ("MCP-RENAME", "echo '{}' > m.tmp && mv m.tmp .mcp.json"),
        ("VSCODE", "mkdir .vscode"),
        ("VSCODE-MOVED", "mkdir v && echo '{}' > v/tasks.json && mv v .vscode"),
        ("CLAUDE-MOVED", "mkdir c && echo '{}' > c/settings.json && mv c .claude"),
        ("HOOK", "printf '#!/bin/sh\\n' > .git/hooks/post-checkout"),
        ("HOOK-VIA-DIR", "ln -s .git/hooks hk && printf '#!/bin/sh\\n' > hk/pre-push"),
        ("HOOK-NEW-REPO", "git init -q fresh && printf '#!/bin/sh\\n' > fresh/.git/hooks/pre-commit"),
        ("HOOKS-MOVED", "git init -q moved && mkdir h && mv moved/.git/hooks moved/.git/hooks.old && mv h moved/.git/hooks"),
        ("HOOKS-SYMLINK", "git init -q hs && rm -rf hs/.git/hooks && mkdir hsh && ln -s ../../hsh hs/.git/hooks && printf '#!/bin/sh\\n' > hsh/pre-commit"),
        ("HOOKS-SYMLINK-FIRST", "mkdir -p hf/refs hfh && ln -s ../hfh hf/hooks && printf '#!/bin/sh\\n' > hfh/pre-commit && echo 'ref: refs/heads/main' > hf/HEAD && mkdir hf/objects"),
        ("POINTER-LINK", "mkdir sub2 && ln -s ../fresh/.git sub2/.git"),
        ("GITDIR-MOVED", "mkdir sub3 g && mv g sub3/.git"),
        ("COMMONDIR", "echo ../fresh/.git > .git/commondir"),
        ("COMMONDIR-PAIR", "mkdir cp && echo 'ref: refs/heads/main' > cp/HEAD && echo ../fresh/.git > cp/commondir"),
        ("CONFIG-APPEND", "printf '[alias]\\n\\tx = !true\\n' >> fresh/.git/config"),
        ("CONFIG-RENAME", "printf '[core]\\n\\tpager = true\\n' > c.tmp && mv c.tmp fresh/.git/config"),
        ("REPO-SLIP", "mkdir -p slip/objects slip/refs && printf '[core]\\n\\tpager = true\\n' > slip/config && echo 'ref: refs/heads/main' > slip/HEAD"),
        ("TMPFILE", "PY -c \"import os; fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600); os.link('/proc/self/fd/%d' % fd, '.idea', src_dir_fd=os.open('.', os.O_RDONLY))\""),
        ("SECOND-NAME", "ln .git/config gm"),
    ];
    let ordinary = "umask 027 && echo x > made.txt && stat -c %a made.txt | grep -qx 640 && echo UMASK-OK; \
         umask 022; mkfifo ff && (echo fifo > ff &) && read l < ff && echo FIFO-$l; \
         (echo out > /dev/stdout) | cat; \
         PY -c \"import os; fd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o600); os.write(fd, b'x'); os.link('/proc/self/fd/%d' % fd, 'kept', src_dir_fd=os.open('.', os.O_RDONLY)); print('TMPFILE-OK')\"; \
         ln -s made.txt sl && cat sl >/dev/null && echo SYMLINK-OK; \
         ln made.txt second && echo LINK-OK; \
         mkdir -p .claude && echo '{}' > .claude/notes.json && echo CLAUDE-DIR-OK; \
         mkdir -p t/a/b && tar cf t.tar t && rm -rf t && tar xf t.tar && test -d t/a/b && echo TAR-OK; \
         git init -q work && cd work && echo hi > f && git add f && git -c user.name=t -c user.email=t@t commit -qm one && git config user.name t && git remote add o ../fresh && git config user.name | grep -qx t && echo GIT-OK";
    for user in USERS {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("names", user);
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let mut script = String::new();
            for (mark, plant) in plants {
                script.push_str(&format!("({plant}) 2>/dev/null && echo PLANTED-{mark}; "));
            }
            script.push_str(ordinary);
            let script = script.replace("PY", super::sandbox::PYTHON);
            let (code, out, err) = lab.sh(backend, &[], &script);
            let what = format!("{} {backend}", lab.what(backend));
            assert_eq!(code, 0, "{what}: {err}");
            assert_lines(
                &out,
                &[
                    "UMASK-OK",
                    "FIFO-fifo",
                    "out",
                    "TMPFILE-OK",
                    "SYMLINK-OK",
                    "LINK-OK",
                    "CLAUDE-DIR-OK",
                    "TAR-OK",
                    "GIT-OK",
                ],
                &what,
            );
            let planted: Vec<&str> = plants
                .iter()
                .map(|(mark, _)| *mark)
                .filter(|mark| out.lines().any(|l| l == format!("PLANTED-{mark}")))
                .collect();
            let ws = &lab.ws;
            let there: Vec<&str> = [
                ".mcp.json",
                ".vscode",
                ".claude/settings.json",
                ".idea",
                ".git/hooks/post-checkout",
                ".git/hooks/pre-push",
                "fresh/.git/hooks/pre-commit",
                "sub2/.git",
                "sub3/.git",
                ".git/commondir",
                "cp/commondir",
                "gm",
                "slip/HEAD",
            ]
            .into_iter()
            .filter(|p| ws.join(p).symlink_metadata().is_ok())
            .collect();
            if backend == "none" {
                let all: Vec<&str> = plants.iter().map(|(mark, _)| *mark).collect();
                assert_eq!(planted, all, "{what}: control: {out}");
                assert_eq!(there.len(), 13, "{what}: control: {there:?}");
                let config = fs::read_to_string(ws.join("fresh/.git/config")).unwrap();
                assert!(config.contains("pager"), "{what}: control: {config}");
                continue;
            }
            assert!(
                planted.is_empty(),
                "{what}: made: {planted:?}\n{out}\n{err}"
            );
            assert!(there.is_empty(), "{what}: there: {there:?}");
            assert!(
                !ws.join("moved/.git/hooks").exists(),
                "{what}: hooks moved in"
            );
        }
    }
}

/// A flipper, stopped when dropped however the test ends (it must not outlive it): a host
/// process, or sandboxes started one after another — its guard ends each after
/// `END_AFTER` answers to its flips (`a_program_racing_the_guard_is_ended`).
struct Flipper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// How many flipping processes ran, and how many were ended by sbx-shell (137).
    thread: Option<std::thread::JoinHandle<(usize, usize)>>,
}

impl Flipper {
    fn start(mut make: impl FnMut() -> Command + Send + 'static) -> Flipper {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut runs, mut ended) = (0, 0);
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                let mut child = make()
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
                runs += 1;
                loop {
                    if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = child.kill();
                        let _ = child.wait();
                        return (runs, ended);
                    }
                    if let Some(status) = child.try_wait().unwrap() {
                        ended += usize::from(status.code() == Some(137));
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
            }
            (runs, ended)
        });
        Flipper {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> (usize, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .map_or((0, 0), |t| t.join().unwrap_or((0, 0)))
    }
}

impl Drop for Flipper {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A symlink flipped in a tight loop while sessions start: the workspace's `.git` is a
/// symlink swapped atomically between two git directories; each session either refuses to
/// start or runs with both configs read-only, so no write ever reaches either. The flipper
/// is a host process, then a second sandbox (whose flips are refused: no `.git` but a
/// directory is made there); enough starts to catch a one-in-a-hundred window.
fn a_symlink_flipped_while_sessions_start(user: User, flipper: &str) {
    if !tools_present() {
        return;
    }
    const STARTS: usize = 200;
    let _machine = super::support::loading_the_machine();
    let lab = repo_lab("flip", user);
    fs::rename(lab.ws.join(".git"), lab.ws.join("git-a")).unwrap();
    let out = Command::new("cp")
        .args(["-a", "git-a", "git-b"])
        .current_dir(&lab.ws)
        .shown();
    assert!(out.status.success());
    std::os::unix::fs::symlink("git-a", lab.ws.join(".git")).unwrap();
    if user == User::Nobody {
        chown_tree(&lab.dir, NOBODY);
    }
    let configs = [lab.ws.join("git-a/config"), lab.ws.join("git-b/config")];
    let before: Vec<String> = configs
        .iter()
        .map(|c| fs::read_to_string(c).unwrap())
        .collect();
    // Replaced atomically (a new link renamed over it), as fast as the kernel lets
    // a loop that forks nothing.
    let flip = "import os\nwhile True:\n for t in ('git-b', 'git-a'):\n  try:\n   os.symlink(t, '.git.new'); os.rename('.git.new', '.git')\n  except OSError:\n   pass\n  os.sched_yield()\n";
    let flipping = match flipper {
        "host" => {
            let (ws, user) = (lab.ws.clone(), user);
            Flipper::start(move || {
                let mut cmd = Command::new(super::sandbox::PYTHON);
                cmd.args(["-c", flip]).current_dir(&ws);
                if user == User::Nobody {
                    cmd.uid(NOBODY).gid(NOBODY);
                }
                cmd
            })
        }
        _ => {
            let lab = lab.clone();
            Flipper::start(move || {
                lab.command("bwrap", &["--", super::sandbox::PYTHON, "-c", flip])
            })
        }
    };
    let (mut ran, mut refused) = (0, 0);
    let t0 = std::time::Instant::now();
    for _ in 0..STARTS {
        let out = lab
            .command(
                "bwrap",
                &["-c", "for c in .git/config git-a/config git-b/config; do echo pwned >> $c; done; echo RAN"],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).contains("RAN") {
            ran += 1;
        } else {
            refused += 1;
            // A start refused for a change says what it found.
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("changed while the sandbox started") {
                assert!(
                    err.contains("changed while the sandbox started (") && err.contains("ls -la"),
                    "{err}"
                );
            }
        }
    }
    let (runs, ended) = flipping.stop();
    let what = format!(
        "{} flipped by {flipper} ({runs} flippers, {ended} ended by their guard): {ran} ran, {refused} refused",
        lab.what("bwrap")
    );
    eprintln!("{what} in {:?}", t0.elapsed());
    let after: Vec<String> = configs
        .iter()
        .map(|c| fs::read_to_string(c).unwrap())
        .collect();
    assert_eq!(after, before, "{what}");
    assert!(ran > 0, "{what}: no session started at all");
    if flipper == "sandbox" {
        // Inside a sandbox the flip itself is refused (no `.git` but a directory
        // is made there) or, raced past, ends that sandbox: `.git` is as it was.
        assert!(
            ended > 0 || fs::read_link(lab.ws.join(".git")).unwrap() == Path::new("git-a"),
            "{what}: a flipping sandbox flipped `.git` and was not ended"
        );
    }
}

#[test]
fn a_symlink_flipped_by_the_host_while_sessions_start_never_lets_a_write_through_as_root() {
    a_symlink_flipped_while_sessions_start(User::Root, "host");
}

#[test]
fn a_symlink_flipped_by_the_sandbox_while_sessions_start_never_lets_a_write_through_as_root() {
    a_symlink_flipped_while_sessions_start(User::Root, "sandbox");
}

#[test]
fn a_symlink_flipped_by_the_host_while_sessions_start_never_lets_a_write_through_as_nobody() {
    a_symlink_flipped_while_sessions_start(User::Nobody, "host");
}

#[test]
fn a_symlink_flipped_by_the_sandbox_while_sessions_start_never_lets_a_write_through_as_nobody() {
    a_symlink_flipped_while_sessions_start(User::Nobody, "sandbox");
}

/// Control for the flips: without the sandbox the same writes land.
#[test]
fn a_write_through_a_git_symlink_lands_without_the_sandbox() {
    if !tools_present() {
        return;
    }
    let lab = repo_lab("flip-control", User::Root);
    let (_, out, _) = lab.sh("none", &[], "echo pwned >> .git/config; echo RAN");
    assert_lines(&out, &["RAN"], "control");
    assert!(fs::read_to_string(lab.ws.join(".git/config"))
        .unwrap()
        .contains("pwned"));
}

/// The claude profile lets Claude Code write `~/.claude`, but not the user settings in it
/// that hold hooks and permissions bare runs obey: read-only when it exists, refused
/// when the session creates it.
#[test]
fn the_claude_profile_keeps_the_global_claude_settings_out_of_reach() {
    if !tools_present() {
        return;
    }
    for user in USERS {
        for backend in ["bwrap", "none"] {
            for exists in [false, true] {
                let lab = Lab::new("claudecfg", user, false);
                let settings = lab.home.join(".claude/settings.json");
                fs::create_dir_all(settings.parent().unwrap()).unwrap();
                if exists {
                    fs::write(&settings, "{}\n").unwrap();
                }
                if user == User::Nobody {
                    chown_tree(&lab.dir, NOBODY);
                }
                let script = "echo '{\"hooks\":{\"Stop\":[]}}' > \"$HOME/.claude/settings.json\" && echo WROTE; \
                              echo ok > \"$HOME/.claude/todo.json\" && echo STATE-OK; sleep 0.3; \
                              grep -q hooks \"$HOME/.claude/settings.json\" 2>/dev/null && echo STILL; echo DONE";
                let (code, out, err) = lab.sh(backend, &["--profile", "claude"], script);
                let what = format!("{} {backend} exists={exists}", lab.what(backend));
                assert_eq!(code, 0, "{what}: {err}");
                assert_lines(&out, &["STATE-OK", "DONE"], &what);
                let planted = fs::read_to_string(&settings).is_ok_and(|t| t.contains("hooks"));
                if backend == "none" {
                    assert_lines(&out, &["WROTE", "STILL"], &what);
                    assert!(planted, "{what}: control");
                } else {
                    assert!(!out.lines().any(|l| l == "STILL"), "{what}: {out}");
                    assert!(!planted, "{what}: the settings hold what the session wrote");
                    assert_eq!(settings.exists(), exists, "{what}");
                }
            }
        }
    }
}

/// Answer ENOSYS to the new mount API in what `cmd` starts, as a kernel before 5.12 does
/// (Debian 11's 5.10, Ubuntu 20.04's 5.4): sbx-shell, bwrap and the helper all see it.
fn without_new_mount_api(cmd: &mut Command) {
    let calls = [
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_mount_setattr,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
    ];
    // Classic BPF: load the call's number; each of `calls` returns ENOSYS; the rest runs.
    let ins = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut program = vec![ins(0x20, 0, 0, 0)];
    for (i, nr) in calls.iter().enumerate() {
        let to_enosys = u8::try_from(calls.len() - i).unwrap();
        program.push(ins(0x15, to_enosys, 0, *nr as u32));
    }
    program.push(ins(0x06, 0, 0, 0x7fff_0000));
    program.push(ins(0x06, 0, 0, 0x0005_0000 | libc::ENOSYS as u32));
    // SAFETY: between fork and exec the closure makes only the prctl and seccomp calls, on
    // a program built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr().cast_mut(),
            };
            let set = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::syscall(libc::SYS_seccomp, 1, 0, &prog as *const libc::sock_fprog) == 0;
            match set {
                true => Ok(()),
                false => Err(std::io::Error::last_os_error()),
            }
        });
    }
}

/// The same protections on a kernel without the new mount API: the helper mounts with
/// mount(2) through its descriptors' magic links instead. Renames of pinned ancestors, the
/// read-only git config, the hidden denied file and a sealed home all hold, beside the
/// control (the same filter, no sandbox).
#[test]
fn the_protections_hold_on_a_kernel_without_the_new_mount_api() {
    if !tools_present() {
        return;
    }
    // The filter does what it says: mount_setattr answers ENOSYS under it.
    let mut probe = Command::new("python3");
    probe.args([
        "-c",
        &format!(
            "import ctypes,os; l=ctypes.CDLL(None,use_errno=True); l.syscall({},-1,b'',0x1000,None,0); print(os.strerror(ctypes.get_errno()))",
            libc::SYS_mount_setattr
        ),
    ]);
    without_new_mount_api(&mut probe);
    let said = String::from_utf8_lossy(&probe.shown().stdout).into_owned();
    assert_eq!(said.trim(), "Function not implemented");
    for user in USERS {
        for backend in ["bwrap", "none"] {
            let lab = repo_lab("oldkernel", user);
            fs::create_dir_all(lab.ws.join("a/b")).unwrap();
            fs::write(lab.ws.join("a/b/secret.txt"), "CANARY-denied\n").unwrap();
            fs::write(lab.home.join(".bashrc"), "# mine\n").unwrap();
            fs::write(lab.home.join("notes.txt"), "notes\n").unwrap();
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let script = "cat a/b/secret.txt 2>/dev/null; \
                          printf '[core]\\n\\tpager = x\\n' >> .git/config && echo CONFIG-WRITTEN; \
                          mv .git .git-moved && echo GIT-RENAMED; mv a c && echo DENIED-RENAMED; \
                          echo more >> README && echo README-OK; \
                          echo evil >> \"$HOME/.bashrc\" && echo BASHRC-WRITTEN; \
                          echo more >> \"$HOME/notes.txt\" && echo NOTES-OK; echo DONE";
            let run = |workspace: &Path| {
                let mut cmd = lab.command(backend, &["--deny", "./a/b/secret.txt", "--workspace"]);
                cmd.arg(workspace)
                    .args(["-c", &format!("cd {} && {script}", lab.ws.display())]);
                without_new_mount_api(&mut cmd);
                let out = cmd.shown();
                (
                    out.status.code().unwrap_or(-1),
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                )
            };
            // The project workspace, then the home as the workspace (sealed).
            let (code, out, err) = run(&lab.ws);
            let what = format!("{} {backend}", lab.what(backend));
            assert_eq!(code, 0, "{what}: {err}");
            assert_lines(&out, &["README-OK", "DONE"], &what);
            let attacks = [
                "CANARY-denied",
                "CONFIG-WRITTEN",
                "GIT-RENAMED",
                "DENIED-RENAMED",
            ];
            if backend == "none" {
                assert_lines(&out, &attacks, &what);
            } else {
                for line in attacks {
                    assert!(!out.lines().any(|l| l == line), "{what}: {line}\n{out}");
                }
                let (code, out, err) = run(&lab.home);
                assert_eq!(code, 0, "{what} (home): {err}");
                assert_lines(&out, &["NOTES-OK", "DONE"], &what);
                assert!(!out.lines().any(|l| l == "BASHRC-WRITTEN"), "{what}: {out}");
            }
        }
    }
}

/// The host's own symlinks in a git directory — `hooks` leading to a directory of the work
/// tree (there, or not made yet), `objects` to a shared store (as an earlier session may
/// leave it) — neither stop a later session from starting nor open a way around the hooks'
/// protection: where git goes is what is protected. Control: without the sandbox, a hook
/// written there runs on the host's next commit.
#[test]
fn symlinks_in_a_git_directory_protect_where_they_lead() {
    if !tools_present() {
        return;
    }
    super::sandbox::each(|backend, user| {
        for (mode, dangling) in [("none", false), (backend, false), (backend, true)] {
            let lab = repo_lab("gitlinks", user);
            fs::remove_dir_all(lab.ws.join(".git/hooks")).unwrap();
            std::os::unix::fs::symlink("../githooks", lab.ws.join(".git/hooks")).unwrap();
            if !dangling {
                fs::create_dir(lab.ws.join("githooks")).unwrap();
            }
            if user == User::Nobody {
                chown_tree(&lab.dir, NOBODY);
            }
            let what = format!("{} dangling={dangling}", lab.what(mode));
            // An earlier session leaves a repository whose `objects` is a symlink.
            let (code, _, err) = lab.sh(
                mode,
                &[],
                "git init -q shared && mv shared/.git/objects store && ln -s ../../store shared/.git/objects",
            );
            assert_eq!(code, 0, "{what}: {err}");
            let mark = lab.outside.join("hook-ran");
            let script = format!(
                "mkdir -p githooks 2>/dev/null; \
                 printf '#!/bin/sh\\ntouch {}\\n' > githooks/pre-commit 2>/dev/null && chmod +x githooks/pre-commit && echo PLANTED; \
                 cd shared && echo a > a && git add a && git -c user.name=t -c user.email=t@t commit -qm a && git gc -q && echo GC-OK",
                mark.display()
            );
            let (code, out, err) = lab.sh(mode, &[], &script);
            assert_eq!(
                code, 0,
                "{what}: the session did not start or failed: {err}"
            );
            assert!(out.lines().any(|l| l == "GC-OK"), "{what}: {out}{err}");
            let commit = host_commit(&lab, &lab.ws);
            assert!(commit.status.success(), "{what}: host commit: {commit:?}");
            let planted = out.lines().any(|l| l == "PLANTED");
            if mode == "none" {
                assert!(planted && mark.exists(), "{what}: control: {out}{err}");
            } else {
                assert!(!planted, "{what}: a hook was written: {out}{err}");
                assert!(!mark.exists(), "{what}: the host's git ran a hook");
            }
        }
    });
}
