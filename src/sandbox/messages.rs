//! The sentences the sandbox's choices say with a remedy, each a function: a container
//! engine or option it cannot use (the problem, then `Hint:` and the exact action), and the
//! start lines for what runs with less than asked (`Fix:`).

use std::fmt::Display;

use crate::sys::say::{hinted, with_fix};

/// A `container.run_args` entry sbx-shell does not pass (`allowed`: the names it passes).
pub(super) fn run_arg_not_allowed(arg: &str, allowed: &[&str]) -> String {
    hinted(
        format_args!(
            "container.run_args {arg:?}: sbx-shell passes only whole --NAME=VALUE options that \
             leave the isolation as it is"
        ),
        format_args!(
            "use one of {} as --NAME=VALUE; the session's own settings (network, mounts, user, \
             limits, variables) come from its policy",
            allowed.join(", ")
        ),
    )
}

/// An engine on another machine (`unset`: how to reach the local one).
pub(super) fn engine_elsewhere(name: &str, endpoint: &str, unset: &str) -> String {
    hinted(
        format_args!(
            "the {name} engine at {endpoint} is not on this machine: it would mount that \
             machine's paths, not this workspace"
        ),
        format_args!("use an engine on this machine ({unset}), or --backend bwrap"),
    )
}

/// A session limit (`option`) the engine's cgroups cannot enforce.
pub(super) fn limit_unenforced(name: &str, option: &str, controller: &str) -> String {
    hinted(
        format_args!(
            "the {name} engine cannot enforce {option} here: its cgroups have no {controller} \
             controller, and it would start the container without the limit"
        ),
        format_args!(
            "enable the {controller} controller for the engine's cgroups, or leave out {option}"
        ),
    )
}

/// What the engine's client said when it could not do what was asked, and the fix.
pub(super) fn engine_unusable(name: &str, said: &str, fix: impl Display) -> String {
    hinted(
        format_args!("the {name} engine could not be used: {said}"),
        fix,
    )
}

/// The start line for a layer `auto` wanted that cannot run: why, what runs instead
/// (`running`: the layers, and what that means), the fix, and the two options that
/// silence or refuse it.
pub(super) fn layer_missing(
    layer: &str,
    why: &str,
    running: impl Display,
    fix: &str,
    backend: &str,
) -> String {
    with_fix(
        format_args!("sbx-shell: {layer} cannot run here: {why}; running with {running}"),
        format_args!(
            "{fix} (--backend {backend} runs so without this line; --require {layer} refuses to \
             run without it)"
        ),
    )
}

/// The start line before Linux 5.14 (`open`: the protected paths that do not exist yet,
/// named, and "and ", or nothing).
pub(super) fn names_unjudged(kernel: &str, open: &str) -> String {
    with_fix(
        format_args!(
            "sbx-shell: Linux {kernel} is older than 5.14: the guard cannot judge the names the \
             program makes, so what would run code outside is held by read-only mounts where \
             it exists; {open}the hooks and config of a repository made in the session can be \
             made, and the end of the session names them"
        ),
        "Linux 5.14 or later (--require names refuses to run without it)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ends_with_its_hint_or_its_fix() {
        for text in [
            run_arg_not_allowed("--privileged", &["--cpus", "--label"]),
            engine_elsewhere("docker", "tcp://h:2375", "unset DOCKER_HOST"),
            limit_unenforced("docker", "--session-processes", "pids"),
            engine_unusable("docker", "boom", "start it"),
        ] {
            let (problem, hint) = text.split_once("\nHint: ").unwrap();
            assert!(!problem.is_empty() && !hint.is_empty(), "{text}");
            assert!(!hint.contains('\n') && !text.contains("  "), "{text}");
        }
        for line in [
            layer_missing(
                "bwrap",
                "no bwrap",
                "landlock + seccomp",
                "install it",
                "landlock",
            ),
            names_unjudged("5.10.0", ""),
        ] {
            assert!(
                line.starts_with("sbx-shell: ") && line.contains(". Fix: "),
                "{line}"
            );
            assert!(!line.contains('\n') && !line.contains("  "), "{line}");
        }
    }
}
