//! Credentials recognised by their value, whatever the variable's name (`DATABASE_URL`,
//! `GH_PAT`, `OPENAI_KEY`): pure. A variable whose value carries one is not handed to the
//! program unless allowed by name (`--allow-env`). docs/config.md lists the same forms.
//!
//! - a URL with a password: `scheme://user:password@host…` (also `scheme://:password@…`);
//! - a PEM private key: `-----BEGIN … PRIVATE KEY-----`;
//! - a JSON Web Token: `eyJ….eyJ….…`;
//! - the token formats in `TOKENS`, each a prefix and at least so many characters of
//!   `[A-Za-z0-9_-]` after it, starting at the value's start or after a character that is
//!   not one of those.

/// (prefix, minimum length of what follows, what it is).
pub const TOKENS: &[(&str, usize, &str)] = &[
    ("ghp_", 30, "a GitHub token"),
    ("gho_", 30, "a GitHub token"),
    ("ghu_", 30, "a GitHub token"),
    ("ghs_", 30, "a GitHub token"),
    ("ghr_", 30, "a GitHub token"),
    ("github_pat_", 30, "a GitHub token"),
    ("glpat-", 20, "a GitLab token"),
    ("xoxb-", 20, "a Slack token"),
    ("xoxp-", 20, "a Slack token"),
    ("xoxa-", 20, "a Slack token"),
    ("xoxr-", 20, "a Slack token"),
    ("xoxs-", 20, "a Slack token"),
    ("xapp-", 20, "a Slack token"),
    ("sk-ant-", 20, "an Anthropic key"),
    ("sk-", 20, "an OpenAI-style secret key"),
    ("AKIA", 16, "an AWS access key id"),
    ("ASIA", 16, "an AWS access key id"),
    ("AIza", 30, "a Google API key"),
    ("sk_live_", 16, "a Stripe key"),
    ("rk_live_", 16, "a Stripe key"),
    ("sk_test_", 16, "a Stripe key"),
    ("npm_", 30, "an npm token"),
    ("pypi-", 40, "a PyPI token"),
    ("hf_", 30, "a Hugging Face token"),
    ("glc_", 30, "a Grafana token"),
    ("dop_v1_", 40, "a DigitalOcean token"),
    ("SG.", 20, "a SendGrid key"),
];

/// What credential `value` carries, if any (for `explain`).
pub fn in_value(value: &str) -> Option<&'static str> {
    if url_with_password(value) {
        return Some("a URL with a password");
    }
    if value.contains("-----BEGIN") && value.contains("PRIVATE KEY-----") {
        return Some("a private key");
    }
    if jwt(value) {
        return Some("a JSON Web Token");
    }
    TOKENS
        .iter()
        .find(|(prefix, min, _)| token_at_boundary(value, prefix, *min))
        .map(|(_, _, what)| *what)
}

fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// `prefix` at a boundary, followed by at least `min` token characters.
fn token_at_boundary(value: &str, prefix: &str, min: usize) -> bool {
    let bytes = value.as_bytes();
    value.match_indices(prefix).any(|(at, _)| {
        let boundary = at == 0 || !token_char(bytes[at - 1]);
        let after = &bytes[at + prefix.len()..];
        boundary && after.iter().take_while(|c| token_char(**c)).count() >= min
    })
}

/// `scheme://[user]:password@host`: a non-empty password before the authority's last `@`.
fn url_with_password(value: &str) -> bool {
    value.match_indices("://").any(|(at, _)| {
        let rest = &value[at + 3..];
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        authority
            .rsplit_once('@')
            .and_then(|(userinfo, _)| userinfo.split_once(':'))
            .is_some_and(|(_, password)| !password.is_empty())
    })
}

/// Three dot-separated base64url parts, the first two JSON objects (`eyJ`).
fn jwt(value: &str) -> bool {
    value.match_indices("eyJ").any(|(at, _)| {
        let mut parts = value[at..].split('.');
        let long = |p: Option<&str>, min: usize| {
            p.is_some_and(|p| p.len() >= min && p.bytes().all(token_char))
        };
        let header = parts.next();
        let payload = parts.next();
        long(header, 10)
            && payload.is_some_and(|p| p.starts_with("eyJ"))
            && long(payload, 10)
            && parts.next().is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_found_by_their_form() {
        let found = [
            (
                "postgres://app:s3cret@db.internal:5432/app",
                "a URL with a password",
            ),
            ("redis://:hunter2@cache:6379/0", "a URL with a password"),
            (
                "https://user:tok@github.com/org/repo.git",
                "a URL with a password",
            ),
            ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "a GitHub token"),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "a GitHub token",
            ),
            (
                "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
                "an OpenAI-style secret key",
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
                "an Anthropic key",
            ),
            ("AKIAIOSFODNN7EXAMPLE", "an AWS access key id"),
            ("token=xoxb-123456789012-abcdefghijklmnop", "a Slack token"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
                "a JSON Web Token",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn…",
                "a private key",
            ),
        ];
        for (value, what) in found {
            assert_eq!(in_value(value), Some(what), "{value}");
        }
    }

    #[test]
    fn ordinary_values_are_not_credentials() {
        for value in [
            "/usr/local/bin:/usr/bin:/bin",
            "https://github.com/org/repo.git",
            "https://user@github.com/org/repo.git",
            "http://proxy.internal:3128",
            "xterm-256color",
            "/home/u/task-runner",
            "sk-short",
            "/srv/disk-0123456789abcdefghijklmnop",
            "rs=0:di=01;34:ln=01;36:*.tsk=00;31",
            "en_US.UTF-8",
            "AKIA-not-a-key",
        ] {
            assert_eq!(in_value(value), None, "{value}");
        }
    }
}
