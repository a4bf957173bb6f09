//! The sandbox's own writes, judged by what they reach and by what the host will later do
//! with it: ordinary git work runs as it does bare, opens mean what they mean, a git config
//! key that ordinary git does not write is refused (beside a control in which the host's
//! git runs it), and what the host does meanwhile is left alone. Both Linux backends, as
//! root and as nobody.

use std::fs;

use super::protections::{host_git, repo_lab};
use super::sandbox::{each, tools_present, Lab, User};
use super::support::Shown;

/// Each step of ordinary git work prints its name when it succeeds.
const GIT_WORK: &str = "set -u; g() { git -c user.name=t -c user.email=t@t \"$@\"; }; \
    mkdir empty && cd empty && git init -q && echo init && git init -q && echo reinit && cd .. && \
    git init -q && echo reinit-ws && \
    echo one > f && g add f && g commit -qm one && echo commit && \
    git config user.name me && git config pull.rebase false && echo config && \
    git init -q --bare up.git && git remote add up ./up.git && echo remote-add && \
    git push -q -u up main 2>/dev/null && echo push-u && \
    git branch -q topic && git branch -q --set-upstream-to=main topic && echo upstream && \
    git worktree add -q wt topic && git -C wt status --short && echo worktree && \
    echo two >> f && g commit -qam two && g -C wt rebase -q main && echo rebase && \
    echo three >> f && git stash -q && git stash pop -q && echo stash && \
    git reset -q --hard && echo reset && git gc -q && echo gc && \
    git clone -q . clone && echo clone && \
    git init -q subsrc && g -C subsrc commit -q --allow-empty -m s && \
    git -c protocol.file.allow=always submodule add -q \"$PWD/subsrc\" sm && g commit -qm sm && echo submodule && \
    git -c protocol.file.allow=always clone -q --recurse-submodules . rclone && test -s rclone/.gitmodules && \
    test -z \"$(git -C rclone status --porcelain)\" && git -C rclone/sm rev-parse -q --verify HEAD >/dev/null && echo clone-submodules && \
    git rm -q .gitmodules && g commit -qm drop && git bisect start HEAD HEAD~2 >/dev/null && test -s .gitmodules && \
    git bisect reset >/dev/null 2>&1 && test ! -e .gitmodules && echo bisect-gitmodules && \
    find . -perm 0 -print | sed 's/^/mode-0 /'";

const GIT_STEPS: [&str; 18] = [
    "init",
    "reinit",
    "reinit-ws",
    "commit",
    "config",
    "remote-add",
    "push-u",
    "upstream",
    "worktree",
    "rebase",
    "stash",
    "reset",
    "gc",
    "clone",
    "submodule",
    "clone-submodules",
    "bisect-gitmodules",
    "",
];

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[test]
fn ordinary_git_work_runs_as_it_does_bare() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        let lab = repo_lab("gitwork", user);
        let (code, out, err) = lab.sh("none", &[], GIT_WORK);
        assert_eq!(code, 0, "control: {err}");
        assert_eq!(lines(&out), GIT_STEPS[..17], "control: {err}");
        let lab = repo_lab("gitwork", user);
        let (code, out, err) = lab.sh(backend, &[], GIT_WORK);
        let what = lab.what(backend);
        assert_eq!(lines(&out), GIT_STEPS[..17], "{what}: {err}");
        assert_eq!(code, 0, "{what}: {err}");
        // The user's git is fine with what the session left.
        for args in [
            &["status", "--short"][..],
            &["-C", "wt", "log", "-1"],
            &["stash", "list"],
        ] {
            let out = host_git(&lab, &lab.ws, args);
            assert!(out.status.success(), "{what}: host git {args:?}: {out:?}");
        }
        assert!(
            !err.contains("planted"),
            "{what}: ordinary work reported: {err}"
        );
    });
}

/// Every writing open of a missing path, with and without O_CREAT, and the mode asked for.
const OPENS: &str = r#"
import os
os.umask(0o027)
flags = {"WRONLY": os.O_WRONLY, "RDWR": os.O_RDWR, "APPEND": os.O_WRONLY | os.O_APPEND,
         "TRUNC": os.O_WRONLY | os.O_TRUNC, "RDONLY": os.O_RDONLY,
         "CREAT": os.O_WRONLY | os.O_CREAT, "CREAT|EXCL": os.O_RDWR | os.O_CREAT | os.O_EXCL,
         "CREAT|TRUNC": os.O_WRONLY | os.O_CREAT | os.O_TRUNC}
for name, f in flags.items():
    path = "missing-" + name.replace("|", "-")
    try:
        os.close(os.open(path, f, 0o764))
        print(name, "made", oct(os.stat(path).st_mode & 0o7777))
    except OSError as e:
        print(name, os.strerror(e.errno))
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
        print(name, "again", "made")
    except OSError as e:
        print(name, "again", os.strerror(e.errno))
"#;

#[test]
fn opens_mean_what_they_mean() {
    if !tools_present() {
        return;
    }
    let script = format!("python3 -c '{}'", OPENS.replace('\'', "'\\''"));
    each(|backend, user| {
        let control = Lab::new("opens", user, false);
        let (code, bare, err) = control.sh("none", &[], &script);
        assert_eq!(code, 0, "control: {err}");
        assert!(bare.contains("WRONLY No such file or directory"), "{bare}");
        let lab = Lab::new("opens", user, false);
        let (code, out, err) = lab.sh(backend, &[], &script);
        let what = lab.what(backend);
        assert_eq!(code, 0, "{what}: {err}");
        assert_eq!(out, bare, "{what}: not as bare");
    });
}

/// Keys git work does not write, each planted in a repository made during the session,
/// with the host command that runs it. `{mark}` is the script that marks the outside; a
/// plant's name is the mark it leaves there.
const PLANTS: &[(&str, &str, &[&str])] = &[
    (
        "header",
        // A key on its section's header line, through git's own lock file and rename.
        "cp .git/config .git/config.lock && printf '[core] fsmonitor = \"{mark}\"\\n' >> .git/config.lock && mv .git/config.lock .git/config",
        &["status"],
    ),
    (
        "uploadpack",
        "git remote add o . && git config remote.o.uploadpack '{mark}; git-upload-pack'",
        &["fetch", "-q", "o"],
    ),
    (
        "ext",
        "git config protocol.ext.allow always && git remote add e 'ext::{mark}'",
        &["fetch", "-q", "e"],
    ),
    (
        "gpgssh",
        "git config gpg.format ssh && git config commit.gpgsign true && git config gpg.ssh.defaultKeyCommand '{mark}'",
        &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"],
    ),
    (
        "hardlink",
        "ln .git/config ../notes && printf '[core]\\n\\tfsmonitor = {mark}\\n' >> ../notes",
        &["status"],
    ),
    (
        "include",
        "printf '[core]\\n\\tfsmonitor = {mark}\\n' > ../inc && git config include.path ../../inc",
        &["status"],
    ),
    (
        "includeif",
        "printf '[core]\\n\\tfsmonitor = {mark}\\n' > ../inc && git config includeIf.gitdir:/.path ../../inc",
        &["status"],
    ),
    ("pager", "git config pager.status '{mark}'", &["TTY", "status"]),
    (
        "sshcommand",
        "git remote add s ssh://example.invalid/r && git config core.sshCommand '{mark}'",
        &["fetch", "-q", "s"],
    ),
    (
        "gitproxy",
        "git remote add g git://example.invalid/r && git config core.gitProxy '{mark}'",
        &["fetch", "-q", "g"],
    ),
    (
        "filter",
        "echo '* filter=x' > .gitattributes && echo a > f && git config filter.x.clean '{mark}'",
        &["add", "f"],
    ),
    (
        "textconv",
        "echo a > f && git add f && git -c user.name=t -c user.email=t@t commit -qm a && echo b > f && echo '* diff=x' > .gitattributes && git config diff.x.textconv '{mark}'",
        &["diff"],
    ),
    (
        "difftool",
        "echo a > f && git add f && git -c user.name=t -c user.email=t@t commit -qm a && echo b > f && git config difftool.x.cmd '{mark}'",
        &["difftool", "-y", "-t", "x"],
    ),
    ("alias", "git config alias.st '!{mark}'", &["st"]),
    (
        // Not a command: a work tree outside, where the host's `reset --hard` writes
        // (`{outside}`: the directory the marks are looked for in).
        "worktree",
        "echo x > worktree && git add worktree && git -c user.name=t -c user.email=t@t commit -qm w && git config core.worktree {outside}",
        &["reset", "-q", "--hard"],
    ),
    (
        "credential",
        "git config credential.helper '{mark}'",
        &["STDIN", "credential", "fill"],
    ),
];

/// `git ARGS` on the host in `dir` as `host_git` runs it; `TTY` first: on a terminal
/// (`script`), for what git does only there (a pager); `STDIN` first: with a request for
/// a credential on its input.
fn host_git_as(lab: &Lab, dir: &std::path::Path, args: &[&str]) {
    match args.first() {
        Some(&"TTY") => {
            let line = format!("git {}", args[1..].join(" "));
            let mut cmd = std::process::Command::new("script");
            cmd.args(["-qec", &line, "/dev/null"])
                .current_dir(dir)
                .env_clear()
                .env("HOME", &lab.home)
                .env("PATH", "/usr/bin:/bin")
                .env("TERM", "xterm")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            if lab.user == User::Nobody {
                use std::os::unix::process::CommandExt;
                cmd.uid(super::sandbox::NOBODY).gid(super::sandbox::NOBODY);
            }
            let _ = cmd.status();
        }
        Some(&"STDIN") => {
            use std::io::Write;
            let mut cmd = std::process::Command::new("git");
            cmd.args(&args[1..])
                .current_dir(dir)
                .env_clear()
                .env("HOME", &lab.home)
                .env("PATH", "/usr/bin:/bin")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_TERMINAL_PROMPT", "0")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            if lab.user == User::Nobody {
                use std::os::unix::process::CommandExt;
                cmd.uid(super::sandbox::NOBODY).gid(super::sandbox::NOBODY);
            }
            let mut child = cmd.spawn().unwrap();
            let _ = child
                .stdin
                .take()
                .unwrap()
                .write_all(b"protocol=https\nhost=example.invalid\n\n");
            let _ = child.wait();
        }
        _ => {
            let _ = host_git(lab, dir, args);
        }
    }
}

#[test]
fn git_config_keys_git_work_does_not_write_are_refused() {
    if !tools_present() {
        return;
    }
    for (backend, user) in [("bwrap", User::Nobody), ("landlock", User::Root)] {
        for (mode, expect_run) in [("none", true), (backend, false)] {
            let lab = repo_lab("gitkeys", user);
            let mut script = String::new();
            for (name, plant, _) in PLANTS {
                let mark = format!("{}/{name}.sh", lab.ws.display());
                script.push_str(&format!(
                    "printf '#!/bin/sh\\ntouch {out}/{name}\\n' > {mark}; chmod +x {mark}; \
                     mkdir -p r-{name}/sub && cd r-{name}/sub && git init -q && ({plant}) 2>&1; cd ../..; ",
                    out = lab.outside.display(),
                    plant = plant
                        .replace("{mark}", &mark)
                        .replace("{outside}", &lab.outside.display().to_string()),
                ));
            }
            let (_, _, err) = lab.sh(mode, &[], &script);
            let what = lab.what(mode);
            for (name, _, host) in PLANTS {
                let dir = lab.ws.join(format!("r-{name}/sub"));
                host_git_as(&lab, &dir, host);
                let ran = lab.outside.join(name).exists();
                assert_eq!(
                    ran, expect_run,
                    "{what}: {name}: the host's git ran it: {ran}\n{err}"
                );
            }
        }
    }
}

/// Ways to complete a repository around the checks made when its names were made: each
/// makes a plain directory a git directory whose config (or a linked worktree's) runs
/// `{mark}` in the host's `git status` with the arguments printed last (from the
/// workspace). `PY`: Python.
const BECOMING: &[(&str, &str)] = &[
    (
        // A descriptor opened while the directory was an ordinary one, written after.
        "descriptor",
        "mkdir -p d/refs && PY -c \"import os; fd = os.open('d/config', os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b'[core]\\n\\trepositoryformatversion = 0\\n'); open('d/HEAD', 'w').write('ref: refs/heads/main\\n'); os.mkdir('d/objects'); os.write(fd, b'\\tfsmonitor = {mark}\\n')\"; echo --git-dir=d",
    ),
    (
        // A second name made while it was an ordinary file, written through after.
        "hardlink",
        "mkdir -p h/refs && printf '[core]\\n\\trepositoryformatversion = 0\\n' > h/config && ln h/config notes && echo 'ref: refs/heads/main' > h/HEAD && mkdir h/objects; printf '\\tfsmonitor = {mark}\\n' >> notes; echo --git-dir=h",
    ),
    (
        // A config larger than any part a check might read, the key at its end.
        "size",
        "mkdir -p s/refs && PY -c \"open('s/config', 'w').write('[core]\\n' + '#' * (17 << 20) + '\\n\\tfsmonitor = {mark}\\n')\" && echo 'ref: refs/heads/main' > s/HEAD && mkdir s/objects; echo --git-dir=s",
    ),
    (
        // The last marker a symlink, or renamed into place.
        "symlink",
        "mkdir -p y/refs store && printf '[core]\\n\\tfsmonitor = {mark}\\n' > y/config && echo 'ref: refs/heads/main' > y/HEAD && ln -s ../store y/objects; echo --git-dir=y",
    ),
    (
        "renamed",
        "mkdir -p q/refs q/objects && printf '[core]\\n\\tfsmonitor = {mark}\\n' > q/config && echo 'ref: refs/heads/main' > H && mv H q/HEAD; echo --git-dir=q",
    ),
    (
        // A linked worktree built by hand: its config written before its `HEAD` and
        // `commondir`, then a `.git` file pointing at it.
        "worktree",
        "git init -q m && git -C m -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git -C m config extensions.worktreeConfig true; \
         mkdir -p m/.git/worktrees/x && printf '[core]\\n\\tfsmonitor = {mark}\\n' > m/.git/worktrees/x/config.worktree && \
         git -C m rev-parse HEAD > m/.git/worktrees/x/HEAD && echo ../.. > m/.git/worktrees/x/commondir; \
         mkdir w && echo \"gitdir: $PWD/m/.git/worktrees/x\" > w/.git && echo \"$PWD/w/.git\" > m/.git/worktrees/x/gitdir; echo -C w",
    ),
    (
        // A config that is a symlink to a file of the work tree (git follows it).
        "config-symlink",
        "mkdir -p c/refs c/objects && printf '[core]\\n\\tfsmonitor = {mark}\\n' > cfg && ln -s ../cfg c/config && \
         echo 'ref: refs/heads/main' > c/HEAD; echo --git-dir=c",
    ),
    (
        // A submodule's git directory built by hand in `modules/`, its work tree's `.git`
        // file pointing at it.
        "module",
        "git init -q p && mkdir -p p/.git/modules/s/refs p/.git/modules/s/objects && \
         printf '[core]\\n\\tfsmonitor = {mark}\\n' > p/.git/modules/s/config && \
         echo 'ref: refs/heads/main' > p/.git/modules/s/HEAD; mkdir -p p/s && echo 'gitdir: ../.git/modules/s' > p/s/.git; echo -C p/s",
    ),
    (
        // A whole tree built in the session's temporary directory, then renamed into
        // the workspace.
        "tree",
        "t=$(mktemp -d) && mkdir -p $t/r/g/refs $t/r/g/objects && printf '[core]\\n\\tfsmonitor = {mark}\\n' > $t/r/g/config && \
         echo 'ref: refs/heads/main' > $t/r/g/HEAD; mv $t/r r; echo --git-dir=r/g",
    ),
];

/// A directory is judged at the moment it becomes a repository: its configs are judged
/// and remade as new files then, so a descriptor opened or a link made before reaches
/// nothing git reads; a hand-built worktree with a config git work does not write never
/// becomes one. Control: without the sandbox the host's `git status` runs each.
#[test]
fn a_directory_is_judged_when_it_becomes_a_repository() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        for mode in ["none", backend] {
            for (name, route) in BECOMING {
                let lab = repo_lab("becoming", user);
                let mark = format!("{}/{name}.sh", lab.ws.display());
                fs::write(
                    &mark,
                    format!(
                        "#!/bin/sh\ntouch {}/{name}\nexit 1\n",
                        lab.outside.display()
                    ),
                )
                .unwrap();
                let script = route
                    .replace("{mark}", &mark)
                    .replace("PY", super::sandbox::PYTHON);
                let script = format!("chmod +x {mark}; {script}");
                if user == User::Nobody {
                    super::sandbox::chown_tree(&lab.dir, super::sandbox::NOBODY);
                }
                let (_, out, err) = lab.sh(mode, &[], &script);
                let what = format!("{} {name}", lab.what(mode));
                let args = out.lines().last().unwrap_or_default();
                assert!(args.starts_with('-'), "{what}: {out}{err}");
                let args: Vec<&str> = args.split(' ').chain(["status", "--short"]).collect();
                let _ = host_git(&lab, &lab.ws, &args);
                let ran = lab.outside.join(name).exists();
                assert_eq!(
                    ran,
                    mode == "none",
                    "{what}: the host's git ran it: {ran}\n{out}{err}"
                );
                // The config whose second name was cut off is named.
                if *name == "hardlink" && mode != "none" {
                    assert!(err.contains("/h/config"), "{what}: not named\n{err}");
                }
            }
        }
    });
}

/// Ways a session leaves git's operation state that makes git run a command (`{mark}`)
/// when the host continues the operation, with the directory to continue in (`D`, relative
/// to the workspace) and the operation. `STOP`: a real interactive rebase of the
/// workspace's last commit, stopped at a `break`; `PICKED`: a cherry-pick of two commits
/// stopped at a conflict on the first, resolved.
const CONTINUED: &[(&str, &str, &str)] = &[
    // git's own todo, from `rebase -x`.
    ("exec-flag", "STOP -x {mark}", "rebase"),
    // A command appended in place, as a shell or an editor writes.
    (
        "in-place",
        "STOP; printf 'exec {mark}\\n' >> .git/rebase-merge/git-rebase-todo",
        "rebase",
    ),
    // git's own `--edit-todo`, its editor writing the todo in place.
    (
        "editor",
        "STOP; printf 'exec {mark}\\n' > plan; GIT_SEQUENCE_EDITOR='cp plan' G rebase --edit-todo",
        "rebase",
    ),
    // vim, which writes the file it read (it checks), in place or by a rename.
    (
        "vim",
        "STOP; vim -N -Es -i NONE +'$s#$#\\rexec {mark}#' +wq .git/rebase-merge/git-rebase-todo",
        "rebase",
    ),
    // Written through a second name made for the todo.
    (
        "hardlink",
        "STOP; ln .git/rebase-merge/git-rebase-todo .git/notes; printf 'x {mark}\\n' >> .git/notes",
        "rebase",
    ),
    // The todo a symlink to a file of the workspace.
    (
        "symlink",
        "STOP; printf 'exec {mark}\\n' > plan; ln -sf ../../plan .git/rebase-merge/git-rebase-todo",
        "rebase",
    ),
    // A new repository's rebase, its whole tree then renamed into place.
    (
        "renamed-tree",
        "mkdir -p n && cd n && git init -q && echo a > a && git add a && G commit -qm a && echo b > b && git add b && G commit -qm b && \
         STOP -x {mark}; cd .. && mkdir -p deep && mv n deep/m; D=deep/m",
        "rebase",
    ),
    // The rebase's merge strategy: git runs `git-merge-STRATEGY`, a path from the work
    // tree's top when it holds a `/`.
    (
        "strategy",
        "STOP; mkdir -p git-merge-; printf '/../strategy.sh\\n' > .git/rebase-merge/strategy; G commit --allow-empty -qm x",
        "rebase",
    ),
    // git reads the whole file as the name, but one line end: a second line is in it.
    (
        "strategy-newline",
        "STOP; mkdir -p 'git-merge-ort\n'; printf 'ort\\n/../strategy-newline.sh\\n' > .git/rebase-merge/strategy; G commit --allow-empty -qm x",
        "rebase",
    ),
    // The sequencer's: `options.strategy` in its options.
    (
        "sequencer",
        "PICKED; printf '[options]\\n\\tstrategy = /../sequencer.sh\\n' > .git/sequencer/opts; mkdir -p git-merge-",
        "cherry-pick",
    ),
];

/// A real interactive rebase of the workspace's last commit, stopped at a `break` (`G`:
/// git with an identity); more arguments may follow.
const STOP: &str = "G() { git -c user.name=t -c user.email=t@t \"$@\"; }; \
    echo more > more && git add more && G commit -qm more && \
    GIT_SEQUENCE_EDITOR='sed -i 1ibreak' G rebase -q -i HEAD~1";

/// Who the host's git commits as, where continuing an operation commits.
const IDENTITY: &[&str] = &["-c", "user.name=t", "-c", "user.email=t@t"];

/// git's state a session leaves runs nothing it wrote when the host continues the
/// operation: while the session runs (the names git reads only ever hold what the guard
/// judged: `exec` lines bound to the session, no strategy but git's own) and after it (the
/// `exec` lines made comments, a foreign strategy removed), each named. Control: without
/// the sandbox the host's `git rebase --continue` (or `cherry-pick --continue`) runs each.
#[test]
fn git_state_left_by_a_session_runs_nothing_when_continued_outside() {
    if !tools_present() || !super::support::require("vim", "vim writing a rebase's todo") {
        return;
    }
    let picked = "G() { git -c user.name=t -c user.email=t@t \"$@\"; }; \
        top=$(git rev-parse HEAD); echo 1 > c && git add c && G commit -qm c1 && echo 2 > d && git add d && G commit -qm c2 && \
        echo 3 > e && git add e && G commit -qm c3 && git checkout -q -b side $top && echo x > c && git add c && G commit -qm x && \
        { G cherry-pick $top..main >/dev/null 2>&1; echo r > c; git add c; }";
    each(|backend, user| {
        for mode in ["none", backend] {
            for (name, route, operation) in CONTINUED {
                let lab = repo_lab("continued", user);
                let mark = format!("{}/{name}.sh", lab.ws.display());
                let body = format!(
                    "#!/bin/sh\ntouch {}/{name}\nexit 1\n",
                    lab.outside.display()
                );
                fs::write(&mark, body).unwrap();
                let (ready, go) = (lab.ws.join(".ready"), lab.ws.join(".go"));
                let script = route
                    .replace("STOP", STOP)
                    .replace("PICKED", picked)
                    .replace("{mark}", &mark)
                    .replace(" G ", " git -c user.name=t -c user.email=t@t ");
                let script = format!(
                    "chmod +x {mark}; D=.; {script}; touch {ready}; \
                     for i in $(seq 600); do test -e {go} && break; sleep 0.05; done; echo $D",
                    ready = ready.display(),
                    go = go.display()
                );
                if user == User::Nobody {
                    super::sandbox::chown_tree(&lab.dir, super::sandbox::NOBODY);
                }
                let session = {
                    let (lab, mode) = (lab.clone(), mode.to_string());
                    std::thread::spawn(move || lab.sh(&mode, &[], &script))
                };
                for _ in 0..600 {
                    if ready.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                let what = format!("{} {name}", lab.what(mode));
                // While the session runs.
                let dir = lab.ws.join(if *name == "renamed-tree" {
                    "deep/m"
                } else {
                    "."
                });
                let status = host_git(&lab, &dir, &["status"]);
                let status = String::from_utf8_lossy(&status.stdout).into_owned();
                let during = host_git(&lab, &dir, &[IDENTITY, &[operation, "--continue"]].concat());
                let ran_during = lab.outside.join(name).exists();
                // An `exec` line bound to the session fails there, and git says which.
                let failed_bound = String::from_utf8_lossy(&during.stderr).contains("SBX_SESSION");
                fs::write(&go, "").unwrap();
                let (_, out, err) = session.join().unwrap();
                assert!(status.contains(operation), "{what}: {status}\n{out}{err}");
                assert_eq!(
                    ran_during,
                    mode == "none",
                    "{what}: the host's git ran it while the session ran\n{out}{err}"
                );
                if mode == "none" {
                    continue;
                }
                // After it.
                let dir = lab.ws.join(out.lines().last().unwrap_or_default());
                let _ = host_git(&lab, &dir, &[IDENTITY, &[operation, "--continue"]].concat());
                assert!(
                    !lab.outside.join(name).exists(),
                    "{what}: the host's git ran it after the session\n{out}{err}"
                );
                let named = ["git-rebase-todo", "strategy", "opts", ".git/notes"]
                    .iter()
                    .any(|f| err.contains(f));
                assert!(named || failed_bound, "{what}: not named\n{err}");
            }
        }
    });
}

/// Inside a session, a rebase's `exec` lines run as they do bare: from `rebase -x`, from an
/// editor (vim, `cp`) writing the todo, after a stop and `git rebase --continue`.
#[test]
fn a_rebase_runs_its_commands_inside_a_session() {
    if !tools_present() || !super::support::require("vim", "vim writing a rebase's todo") {
        return;
    }
    let script = format!(
        "{STOP} -x 'echo flag >> ran' && \
        printf 'exec echo cp >> ran\\n' > plan && cat .git/rebase-merge/git-rebase-todo >> plan && \
        GIT_SEQUENCE_EDITOR='cp plan' G rebase --edit-todo && \
        vim -N -Es -i NONE +'$s/$/\\rexec echo vim >> ran/' +wq .git/rebase-merge/git-rebase-todo && \
        G rebase --continue >/dev/null 2>&1; echo rc=$?; sort ran"
    );
    each(|backend, user| {
        for mode in ["none", backend] {
            let lab = repo_lab("execinside", user);
            let (code, out, err) = lab.sh(mode, &[], &script);
            let what = lab.what(mode);
            assert_eq!(
                (code, out.as_str()),
                (0, "rc=0\ncp\nflag\nvim\n"),
                "{what}: {err}"
            );
        }
    });
}

/// A rebase the host left with commands in its todo is the host's: a session that reads it
/// and works in the repository leaves it as it was.
#[test]
fn a_rebase_the_host_left_is_left_alone() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        let lab = repo_lab("hostrebase", user);
        let stop = format!("{STOP} -x 'make test'");
        if user == User::Nobody {
            super::sandbox::chown_tree(&lab.dir, super::sandbox::NOBODY);
        }
        let _ = lab.sh("none", &[], &stop);
        let todo = lab.ws.join(".git/rebase-merge/git-rebase-todo");
        let before = fs::read_to_string(&todo).unwrap();
        assert!(before.contains("\nexec make test"), "{before}");
        let work = "cat .git/rebase-merge/git-rebase-todo >/dev/null && git status >/dev/null && echo x > y && echo OK";
        let (code, out, err) = lab.sh(backend, &[], work);
        let what = lab.what(backend);
        assert_eq!((code, out.trim()), (0, "OK"), "{what}: {err}");
        assert_eq!(fs::read_to_string(&todo).unwrap(), before, "{what}");
        assert!(!err.contains("sbx-shell disarmed them"), "{what}: {err}");
    });
}

#[test]
fn what_the_host_does_during_a_session_is_left_alone() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        let lab = repo_lab("hostwork", user);
        let ws = lab.ws.clone();
        let host = {
            let lab = lab.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(400));
                let out = host_git(&lab, &lab.ws, &["config", "core.editor", "vim"]);
                assert!(out.status.success(), "{out:?}");
                let vscode = lab.ws.join(".vscode");
                fs::create_dir_all(&vscode).unwrap();
                for i in 0..70 {
                    let tmp = vscode.join("settings.json.tmp");
                    fs::write(&tmp, format!("{{\"n\": {i}}}")).unwrap();
                    fs::rename(&tmp, vscode.join("settings.json")).unwrap();
                }
                fs::write(lab.ws.join("go"), "").unwrap();
            })
        };
        let (code, out, err) = lab.sh(
            backend,
            &[],
            "for i in $(seq 200); do test -e go && break; sleep 0.05; done; sleep 0.3; echo DONE",
        );
        host.join().unwrap();
        let what = lab.what(backend);
        assert_eq!((code, out.trim()), (0, "DONE"), "{what}: {err}");
        let config = fs::read_to_string(ws.join(".git/config")).unwrap();
        assert!(config.contains("editor = vim"), "{what}: {config}");
        assert!(config.contains("[core]"), "{what}: {config}");
        assert_eq!(
            fs::read_to_string(ws.join(".vscode/settings.json")).unwrap(),
            "{\"n\": 69}",
            "{what}"
        );
        assert!(
            !err.contains("left code that runs outside"),
            "{what}: {err}"
        );
    });
}

/// A writable path inside the workspace: bound by sbx-shell's helper, never by bwrap (which
/// before 0.12.0 follows a symlink while making a mount point); and one that an earlier
/// session turned into a way elsewhere (a parent replaced by a symlink) is refused at the
/// start, beside the control: the same write, bare, lands outside.
#[test]
fn a_writable_path_inside_the_workspace_is_not_moved_by_an_earlier_session() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        let lab = Lab::new("nested", user, false);
        let what = lab.what(backend);
        // An inner writable path that is a real directory: writable, as bare.
        let (code, out, err) = lab.sh(
            backend,
            &["--write", "./out"],
            "mkdir -p out && echo x > out/f && echo INNER-OK",
        );
        assert_eq!((code, out.trim()), (0, "INNER-OK"), "{what}: {err}");
        // Session 1 plants the symlink.
        let plant = format!(
            "mkdir -p a && rm -rf a && ln -s {} a && echo PLANTED",
            lab.outside.display()
        );
        let (code, out, err) = lab.sh(backend, &[], &plant);
        assert_eq!((code, out.trim()), (0, "PLANTED"), "{what}: {err}");
        fs::create_dir_all(lab.outside.join("b")).unwrap();
        if user == User::Nobody {
            super::sandbox::chown_tree(&lab.outside, super::sandbox::NOBODY);
        }
        // Control: a write to a/b lands outside.
        let (code, _, err) = lab.sh("none", &[], "echo x > a/b/control");
        assert_eq!(code, 0, "control: {err}");
        assert!(lab.outside.join("b/control").exists(), "control");
        // Session 2 asks for a/b: refused, nothing written outside.
        let (code, _, err) = lab.sh(backend, &["--write", "./a/b"], "echo x > a/b/g");
        assert_ne!(code, 0, "{what}: {err}");
        assert!(err.contains("leads through the symlink"), "{what}: {err}");
        assert!(!lab.outside.join("b/g").exists(), "{what}");
    });
}

/// The guard acts for the program only where the program's own rules let it: a file
/// outside the writable trees, reached for writing (appending, truncating) through the
/// program's read-only descriptor (`/proc/self/fd/N`), through a symlink made in the
/// workspace, or named directly; a hard link to it made in the workspace through the
/// symlink; a name made outside; and, under Landlock alone, a file the
/// program may not read, opened through a symlink. Control: bare, each lands.
#[test]
fn the_guard_writes_for_the_program_only_where_the_program_may() {
    if !tools_present() {
        return;
    }
    const SCRIPT: &str = r#"
import os, sys
out = sys.argv[1]
target = os.path.join(out, "target.txt")
def attempt(name, f):
    try:
        f()
        print(name, "WROTE")
    except OSError as e:
        print(name, e.strerror)
fd = os.open(target, os.O_RDONLY)
attempt("fd", lambda: os.close(os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_APPEND)))
attempt("trunc", lambda: os.close(os.open("/proc/self/fd/%d" % fd, os.O_WRONLY | os.O_TRUNC)))
os.symlink(sys.argv[2], "secret-link")
def read_secret():
    f = os.open("secret-link", os.O_RDONLY | os.O_CREAT, 0o644)
    if os.read(f, 100) != b"secret\n":
        raise OSError(5, "read nothing")
attempt("read", read_secret)
os.symlink(target, "link")
attempt("link", lambda: os.close(os.open("link", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)))
attempt("named", lambda: os.close(os.open(target, os.O_RDWR)))
here = os.open(".", os.O_RDONLY)
attempt("hardlink", lambda: os.link("link", "hard", src_dir_fd=here, follow_symlinks=True))
attempt("made", lambda: os.close(os.open(os.path.join(out, "new.txt"), os.O_WRONLY | os.O_CREAT, 0o644)))
attempt("dir", lambda: os.mkdir(os.path.join(out, "newdir")))
"#;
    each(|backend, user| {
        for mode in ["none", backend] {
            let lab = Lab::new("reach", user, false);
            fs::write(lab.outside.join("target.txt"), "t\n").unwrap();
            if user == User::Nobody {
                super::sandbox::chown_tree(&lab.outside, super::sandbox::NOBODY);
            }
            // Readable, not writable.
            let outside = lab.outside.display().to_string();
            // Beside the lab, readable to its user bare; denied to the program.
            let secret = lab.dir.join("secret");
            fs::write(&secret, "secret\n").unwrap();
            if user == User::Nobody {
                super::sandbox::chown_tree(&secret, super::sandbox::NOBODY);
            }
            let out = lab
                .command(
                    mode,
                    &[
                        "--read",
                        &outside,
                        "--deny",
                        secret.to_str().unwrap(),
                        "--",
                        super::sandbox::PYTHON,
                        "-c",
                        SCRIPT,
                    ],
                )
                .arg(&lab.outside)
                .arg(&secret)
                .shown();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let what = lab.what(mode);
            let wrote = text.lines().filter(|l| l.ends_with("WROTE")).count();
            // Reading a denied file is for Landlock alone to refuse (bwrap hides it): asked
            // of the guard, through a symlink, it refuses it too.
            let read = text.lines().any(|l| l == "read WROTE");
            if mode == "none" {
                assert_eq!(wrote, 8, "control: {text}");
            } else {
                assert_eq!(wrote, 0, "{what}: {text}");
                assert!(!read, "{what}: {text}");
                assert_eq!(text.lines().count(), 8, "{what}: {text}");
                assert_eq!(
                    fs::read_to_string(lab.outside.join("target.txt")).unwrap(),
                    "t\n",
                    "{what}: written or truncated"
                );
            }
        }
    });
}

/// A protected file with a second name made before the session (by an earlier session or
/// the host): named at the start, and a write through that name is refused as through its
/// own. Control: bare, the write through the other name lands in the repository's config.
#[test]
fn a_protected_file_is_protected_under_every_name() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        for mode in ["none", backend] {
            let lab = repo_lab("linked", user);
            fs::hard_link(lab.ws.join(".git/config"), lab.ws.join("notes")).unwrap();
            let (code, out, err) = lab.sh(
                mode,
                &[],
                "(: > notes) 2>/dev/null; printf '[core]\\n\\tpager = touch x\\n' >> notes && echo WROTE; echo DONE",
            );
            let what = lab.what(mode);
            assert_eq!(code, 0, "{what}: {err}");
            let config = fs::read_to_string(lab.ws.join(".git/config")).unwrap();
            if mode == "none" {
                assert!(
                    out.contains("WROTE") && config.contains("pager"),
                    "control: {out}"
                );
            } else {
                assert!(
                    !out.contains("WROTE") && !config.contains("pager"),
                    "{what}: {out}"
                );
                assert!(config.contains("[core]"), "{what}: truncated: {config:?}");
                assert!(
                    err.contains(".git/config has another name"),
                    "{what}: not named at the start: {err}"
                );
            }
        }
    });
}

/// sbx-shell killed with SIGKILL during a session leaves every protected file with its own
/// mode: nothing is sealed for a session (the guard refuses writes when they are made), so
/// nothing waits to be put back.
#[test]
fn a_killed_session_leaves_the_modes_as_they_were() {
    if !tools_present() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    each(|backend, user| {
        let lab = repo_lab("killed", user);
        let hook = lab.ws.join(".git/hooks/pre-commit");
        fs::write(&hook, "#!/bin/sh\n").unwrap();
        fs::write(lab.ws.join(".mcp.json"), "{}").unwrap();
        if user == User::Nobody {
            super::sandbox::chown_tree(&lab.ws, super::sandbox::NOBODY);
        }
        let paths = [
            lab.ws.join(".git/config"),
            lab.ws.join(".git/hooks"),
            hook,
            lab.ws.join(".mcp.json"),
        ];
        let modes = || -> Vec<u32> {
            paths
                .iter()
                .map(|p| fs::metadata(p).unwrap().permissions().mode())
                .collect()
        };
        let before = modes();
        let mut child = lab
            .command(backend, &["-c", "touch started; sleep 30"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..200 {
            if lab.ws.join("started").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let during = modes();
        let _ = child.kill();
        let _ = child.wait();
        let what = lab.what(backend);
        assert!(
            lab.ws.join("started").exists(),
            "{what}: the session never started"
        );
        assert_eq!(during, before, "{what}: modes changed during the session");
        assert_eq!(modes(), before, "{what}: modes changed after SIGKILL");
    });
}
