//! The sentences a run says with a remedy, each a function: the errors that stop it (the
//! problem, then `Hint:` and the exact action) and the notes it starts with (`Fix:`).
//! The steps call them; none decides anything.

use std::fmt::Display;
use std::path::Path;

use anyhow::anyhow;

use crate::sys::say::{hinted, with_fix};

/// The user's config does not load; sbx-shell may be this account's login shell, so the
/// hint says how to get back in.
pub(super) fn config_broken(error: impl Display, config: &Path) -> anyhow::Error {
    anyhow!(hinted(
        error,
        format_args!(
            "until it is fixed, sbx-shell refuses to start, logins through it too; from another \
             session, account or a root console, fix or move aside {} (sbx-shell runs with its \
             defaults without it), or give the account another shell: chsh -s /bin/bash",
            config.display()
        )
    ))
}

/// No real shell is known, and the fallback runs.
pub(super) fn fallback_shell(shell: &str, config: &Path) -> String {
    with_fix(
        format_args!(
            "sbx-shell: no real shell is known ($SHELL and the passwd entry name sbx-shell or \
             nothing usable, and no \"shell\" is configured): running {shell}"
        ),
        format_args!(
            "sbx-shell login-shell --shell /bin/bash (records \"shell\" in {}), or run with \
             --shell",
            config.display()
        ),
    )
}

/// One of sbx-shell's commands given after the options.
pub(super) fn command_after_options(word: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("`{word}` is a command of sbx-shell, and a command comes before the options"),
        format_args!(
            "sbx-shell {word} [OPTIONS] (to run a program named {word} instead: sbx-shell \
             [OPTIONS] -- {word})"
        )
    ))
}

/// Root's program would stay host root where nothing can read as an ordinary user.
pub(super) fn root_cannot_switch_ids() -> anyhow::Error {
    anyhow!(hinted(
        "root's program would stay host root here, and sbx-shell cannot judge what it reads as \
         an ordinary user: it lacks CAP_SETUID or CAP_SETGID",
        "run sbx-shell with those capabilities (a container started with --cap-drop ALL has \
         none), or as an ordinary user"
    ))
}

/// Root's program stays host root, its reads judged by the guard (`--verbose`).
pub(super) fn root_reads_judged(why: Option<&str>) -> String {
    let why = why.map_or(String::new(), |w| format!(" ({w})"));
    format!(
        "sbx-shell: root's program stays host root{why}: the guard opens each file it reads \
         and hands over only what any user may read, or what the policy grants"
    )
}

/// A processes limit asked of root, which the kernel exempts.
pub(super) fn processes_limit_for_root() -> anyhow::Error {
    anyhow!(hinted(
        "the processes limit cannot be enforced for root: the kernel exempts uid 0 from \
         RLIMIT_NPROC",
        "run sbx-shell as a normal user, or leave out --processes / limits.processes"
    ))
}

/// `--image` without a container backend.
pub(super) fn image_without_container(image: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--image {image}: an image is run by the container backends only"),
        "add --backend docker or --backend podman, or leave out --image"
    ))
}

/// The start line of a shell the user types into.
pub(super) fn sandboxed_shell(backend: &str, profile: &str) -> String {
    format!(
        "sbx-shell: this shell is sandboxed ({backend}, profile {profile}); what it refuses: \
         `sbx-shell log --follow` from another terminal, `sbx-shell why PATH|HOST`"
    )
}

/// sbx-shell's own directory cannot be made.
pub(super) fn own_dir_not_made(dir: &Path) -> String {
    hinted(
        format_args!(
            "cannot create {}, sbx-shell's own directory (the sandbox keeps it read-only)",
            dir.display()
        ),
        "check that its parent is writable",
    )
}

/// A directory the policy makes writable cannot be made.
pub(super) fn state_not_made(dir: &Path) -> String {
    hinted(
        format_args!(
            "cannot create {}, which the policy makes writable",
            dir.display()
        ),
        "create it yourself, or drop it from the policy",
    )
}

/// The private home cannot be made.
pub(super) fn private_home_not_made(dir: &Path) -> String {
    hinted(
        format_args!("cannot create the private home {}", dir.display()),
        "make its parent writable, or run with --no-private-home (\"private_home\": false)",
    )
}

/// A seed of the profile cannot be copied.
pub(super) fn seed_not_copied(from: &Path, to: &Path) -> String {
    hinted(
        format_args!("cannot copy {} to {}", from.display(), to.display()),
        "copy it yourself, or drop the seed from the profile",
    )
}

/// `--ssh-key` with no agent to take the keys from.
pub(super) fn no_ssh_agent() -> anyhow::Error {
    anyhow!(hinted(
        "--ssh-key: there is no ssh agent to take the keys from (SSH_AUTH_SOCK is not set)",
        "start one and add the key, then run sbx-shell from that shell: eval \"$(ssh-agent)\"; \
         ssh-add ~/.ssh/id_ed25519"
    ))
}

/// The user's ssh agent does not answer.
pub(super) fn ssh_agent_silent(agent: &Path, error: impl Display) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "--ssh-key: cannot ask your ssh agent at {} for its keys: {error}",
            agent.display()
        ),
        "check that it runs (ssh-add -l)"
    ))
}

/// The session's agent socket would not fit in a `sockaddr_un`.
pub(super) fn ssh_socket_too_long(socket: &Path) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "the ssh agent's socket path is too long for a unix socket: {}",
            socket.display()
        ),
        "set XDG_STATE_HOME to a shorter directory"
    ))
}

/// A key named by fingerprint that the user's agent does not hold.
pub(super) fn ssh_key_not_held(fingerprint: &str) -> String {
    with_fix(
        format_args!("sbx-shell: ssh: your agent holds no key {fingerprint}: it is left out"),
        "ssh-add the key, or give its .pub file",
    )
}

/// A key named by its file that the user's agent does not hold.
pub(super) fn ssh_key_cannot_sign(key: impl Display, fingerprint: &str) -> String {
    with_fix(
        format_args!(
            "sbx-shell: ssh: your agent does not hold {key} ({fingerprint}): it cannot sign with it"
        ),
        "ssh-add the key",
    )
}

/// `known_hosts` lists the host on other ports only.
pub(super) fn ssh_host_on_other_ports(
    host: impl Display,
    fingerprint: &str,
    key: impl Display,
    name: &str,
    ports: &[u16],
) -> String {
    let listed: Vec<String> = ports.iter().map(u16::to_string).collect();
    let first = ports.first().copied().unwrap_or(22);
    with_fix(
        format_args!(
            "sbx-shell: ssh: known_hosts lists no key for {host} on port 22, but lists it on port \
             {}: logins on port 22 with {fingerprint} will be refused",
            listed.join(", ")
        ),
        format_args!("name the port, --ssh-key {key}@{name}:{first}"),
    )
}

/// `known_hosts` does not list the host.
pub(super) fn ssh_host_unknown(host: impl Display, fingerprint: &str) -> String {
    with_fix(
        format_args!(
            "sbx-shell: ssh: known_hosts lists no key for {host}: logins there with \
             {fingerprint} will be refused"
        ),
        "connect once outside the sandbox and check its key",
    )
}

/// A `--ssh-key` file that cannot be read or is not a public key (`what`: why).
pub(super) fn not_a_public_key(path: &Path, what: impl Display) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--ssh-key {}: {what}", path.display()),
        "give the public key file (ssh-keygen -y -f KEY > KEY.pub makes one), or the key's \
         fingerprint (ssh-add -l)"
    ))
}

/// `--credential` in a session without a proxy.
pub(super) fn credential_without_proxy(name: &str) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("--credential {name}: this session has no proxy to add it"),
        "credentials need the network allow-list (--net allow=…) and a sandbox"
    ))
}

/// Landlock alone: the session's private directory under `/tmp` or `/dev/shm` cannot be
/// made.
pub(super) fn session_dir_not_made(what: &str, under: &str) -> String {
    hinted(
        format_args!("cannot create the session's {what} under {under}"),
        "remove what is in the way (`sbx-shell explain` shows the path), or use the bwrap \
         backend",
    )
}

/// No name is free for a session's directory.
pub(super) fn no_session_dir(parent: &Path, error: impl Display) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "cannot take a directory of its own in {}: {error}",
            parent.display()
        ),
        "if no session of yours runs, remove what is there"
    ))
}

/// The image of the host's links cannot be made.
pub(super) fn links_image_not_made(error: impl Display) -> anyhow::Error {
    anyhow!(hinted(
        format_args!("cannot make the image of the host's links at / ({error})"),
        "sbx-shell makes it with the host's tar; install tar, or use --image"
    ))
}

/// The running executable is gone, so no container can be given it.
pub(super) fn executable_replaced() -> anyhow::Error {
    anyhow!(hinted(
        "the sbx-shell executable was replaced or removed since it started, so the container \
         cannot be given it",
        "start sbx-shell again"
    ))
}

/// A writable place changed into a symlink, or went, before the container mounts it.
pub(super) fn place_changed(path: &Path) -> anyhow::Error {
    anyhow!(hinted(
        format_args!(
            "{} is a symlink or gone now: it is not what the policy named, so it is not mounted \
             into the container",
            path.display()
        ),
        format_args!(
            "run again; if this repeats, something keeps changing it: `ls -la {}` shows what \
             is there",
            path.display()
        )
    ))
}

/// The todos sbx-shell disarmed after the session (`disarm`).
pub(super) fn todos_disarmed(disarmed: &[String]) -> String {
    hinted(
        format_args!(
            "this session left a rebase or cherry-pick that would run commands outside the \
             sandbox when continued; sbx-shell disarmed them: {}",
            disarmed.join("; ")
        ),
        "continue the operation inside sbx-shell; to keep a todo's command, read it, then run \
         `git rebase --edit-todo` and remove its `# `",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_ends_with_its_hint_and_each_note_with_its_fix() {
        let errors = [
            config_broken("bad", Path::new("/c")),
            command_after_options("explain"),
            root_cannot_switch_ids(),
            processes_limit_for_root(),
            image_without_container("debian"),
            no_ssh_agent(),
            ssh_agent_silent(Path::new("/a"), "gone"),
            ssh_socket_too_long(Path::new("/s")),
            not_a_public_key(Path::new("/k"), "not a public key"),
            credential_without_proxy("GH_TOKEN"),
            no_session_dir(Path::new("/p"), "busy"),
            links_image_not_made("no tar"),
            executable_replaced(),
            place_changed(Path::new("/w")),
        ];
        for e in errors {
            let text = e.to_string();
            let (problem, hint) = text.split_once("\nHint: ").unwrap();
            assert!(!problem.is_empty() && !hint.is_empty(), "{text}");
            assert!(!hint.contains('\n') && !text.contains("  "), "{text}");
        }
        for line in [
            fallback_shell("/bin/sh", Path::new("/c")),
            ssh_key_not_held("SHA256:x"),
            ssh_key_cannot_sign("~/.ssh/k.pub", "SHA256:x"),
            ssh_host_on_other_ports("h", "SHA256:x", "~/.ssh/k.pub", "h", &[2222]),
            ssh_host_unknown("h", "SHA256:x"),
        ] {
            assert!(
                line.starts_with("sbx-shell: ") && line.contains(". Fix: "),
                "{line}"
            );
            assert!(!line.contains('\n') && !line.contains("  "), "{line}");
        }
        assert_eq!(
            ssh_host_on_other_ports("h", "F", "k", "h", &[2222, 2200]),
            "sbx-shell: ssh: known_hosts lists no key for h on port 22, but lists it on port \
             2222, 2200: logins on port 22 with F will be refused. Fix: name the port, \
             --ssh-key k@h:2222"
        );
    }
}
