//! The sentences the network's pieces say with a remedy, each a function: the options they
//! read (`--credential`, `--publish`, `--resolve`), what they refuse to start, and what
//! the proxy answers a refused client. The problem, then `Hint:` and the exact action.

use std::fmt::Display;

use crate::sys::say::hinted;

/// `--credential NAME` with `NAME` unset or empty.
pub(super) fn credential_unset(name: &str) -> String {
    hinted(
        format_args!("--credential {name}: {name} is not set"),
        format_args!(
            "set it in the environment sbx-shell starts from (export {name}=…), or leave out \
             --credential {name}"
        ),
    )
}

/// `--credential NAME` whose value is not text.
pub(super) fn credential_not_text(name: &str) -> String {
    hinted(
        format_args!("--credential {name}: its value is not text"),
        "a credential is sent in an HTTP header: give it as text",
    )
}

/// `--credential NAME` whose value holds a control character.
pub(super) fn credential_control_character(name: &str) -> String {
    hinted(
        format_args!("--credential {name}: its value holds a control character (a line end?)"),
        format_args!(
            "a credential is sent in an HTTP header: remove the line end (e.g. export \
             {name}=\"$(printf %s \"${name}\" | tr -d '\\n')\")"
        ),
    )
}

/// A `--publish` that is neither of its forms.
pub(super) fn publish_spelling(entry: &str) -> String {
    hinted(
        format_args!("--publish {entry}: not PORT or HOSTPORT:PORT"),
        "e.g. --publish 5173 (the program's port 5173 on this machine's localhost:5173) or \
         --publish 8081:8080",
    )
}

/// A host port published twice (`instead`: a port to suggest).
pub(super) fn published_twice(entry: &str, host_port: u16, instead: u16, port: u16) -> String {
    hinted(
        format_args!("--publish {entry}: the host's port {host_port} is published twice"),
        format_args!("give each a port of its own, e.g. --publish {instead}:{port}"),
    )
}

/// A published port this machine cannot listen on (`free`: a free port near it).
pub(super) fn publish_taken(
    asked: &str,
    host_port: u16,
    error: impl Display,
    free: u16,
    port: u16,
) -> String {
    hinted(
        format_args!(
            "--publish {asked}: cannot listen on this machine's localhost:{host_port} ({error})"
        ),
        format_args!("publish it on a free port, e.g. --publish {free}:{port}"),
    )
}

/// A `--resolve` that is not `HOST:ADDR`.
pub(super) fn resolve_spelling(entry: &str) -> String {
    hinted(
        format_args!("--resolve {entry}: not HOST:ADDR"),
        "write e.g. --resolve api.example.com:127.0.0.1 or --resolve api.example.com:[::1]",
    )
}

/// `--resolve` without an allow-list.
pub(super) fn resolve_without_allow_list() -> String {
    hinted(
        "--resolve applies to a network allow-list only",
        "add --net allow=HOST,… or leave out --resolve",
    )
}

/// A loopback service on the port the sandbox's own proxy listens on.
pub(super) fn service_on_proxy_port(port: u16) -> String {
    hinted(
        format_args!(
            "--net allow=localhost:{port}: the sandbox's proxy listens on port {port} of the \
             sandbox's loopback"
        ),
        "reach that service through another port of the host, or with --backend landlock",
    )
}

/// What the proxy answers when TLS with the host for a credential failed.
pub(super) fn credential_tls_failed(error: impl Display) -> String {
    hinted(
        format_args!("sbx-shell: TLS with {error}"),
        "a host with a private CA: give sbx-shell its certificate in SSL_CERT_FILE",
    )
}

/// What the proxy answers a refused client: why, and the option that allows it.
pub(super) fn host_refused(target: impl Display, reason: &str, fix: &str) -> String {
    hinted(
        format_args!("sbx-shell: {target} {reason}"),
        format_args!("{fix} allows it (sbx-shell's network allow-list)"),
    )
}

/// The sandbox's proxy refused a connection (`__sbx_connect`, ssh's proxy command).
pub(super) fn connect_refused(to: &str, line: &str) -> String {
    hinted(
        format_args!("the sandbox's proxy refused {to} ({line})"),
        format_args!(
            "allow it with --net allow={}",
            crate::policy::refusal::shell_word(to)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_ends_with_its_hint() {
        for text in [
            credential_unset("T"),
            credential_not_text("T"),
            credential_control_character("T"),
            publish_spelling("x"),
            published_twice("5173", 5173, 5174, 5173),
            publish_taken("5173", 5173, "in use", 5174, 5173),
            resolve_spelling("x"),
            resolve_without_allow_list(),
            service_on_proxy_port(3128),
            credential_tls_failed("h: bad certificate"),
            host_refused("h:443", "is not in the allow-list", "--net allow=h"),
            connect_refused("h:22", "HTTP/1.1 403 Forbidden"),
        ] {
            let (problem, hint) = text.split_once("\nHint: ").unwrap();
            assert!(!problem.is_empty() && !hint.is_empty(), "{text}");
            assert!(!hint.contains('\n') && !text.contains("  "), "{text}");
        }
        assert!(credential_control_character("T")
            .ends_with(r#"export T="$(printf %s "$T" | tr -d '\n')")"#));
    }
}
