//! Where a path stands under a policy: the one judgement behind the run's refusals
//! (`refusal::of_write`) and `why`'s answers. Denied first (a denial wins over every
//! grant), then protected, then the private home's own copies, then the writable places;
//! read-only everywhere else. Pure: what only the disk can tell — whether a directory is a
//! repository whose own places (hooks, config) make git run code — is asked of
//! `git_place`.

use std::path::{Path, PathBuf};

use super::config::FsMode;
use super::home::Kept;
use super::{Policy, ResolvedPath};

/// Where a path stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathVerdict<'a> {
    /// Inside a denied path: hidden.
    Denied(&'a ResolvedPath),
    /// Inside a protected path of the policy: readable, never writable.
    Protected(&'a ResolvedPath),
    /// One of git's own places in a repository (`git_place`'s answer): like `Protected`.
    GitPlace(PathBuf),
    /// The profile's own copy in the private home: writable, the user's never written.
    Kept(&'a Kept),
    /// Inside a writable place the policy names.
    Writable(&'a ResolvedPath),
    /// Inside the workspace, in workspace-write mode.
    Workspace,
    /// Filesystem mode unrestricted.
    Unrestricted,
    /// Outside every writable place.
    ReadOnly,
}

/// Where `at` stands under `policy`.
pub fn of_path<'a>(
    policy: &'a Policy,
    at: &Path,
    git_place: &dyn Fn(&Path) -> Option<PathBuf>,
) -> PathVerdict<'a> {
    let fs = &policy.filesystem;
    if let Some(d) = fs.denied.iter().find(|d| under(at, d)) {
        return PathVerdict::Denied(d);
    }
    if let Some(p) = fs.protected.iter().find(|p| under(at, p)) {
        return PathVerdict::Protected(p);
    }
    if let Some(place) = git_place(at) {
        return PathVerdict::GitPlace(place);
    }
    if let Some(kept) = policy
        .private_home
        .as_ref()
        .and_then(|h| h.kept.iter().find(|k| at.starts_with(&k.path)))
    {
        return PathVerdict::Kept(kept);
    }
    if let Some(w) = fs.writable.iter().find(|w| under(at, w)) {
        return PathVerdict::Writable(w);
    }
    match fs.mode {
        FsMode::WorkspaceWrite if under(at, &fs.workspace) => PathVerdict::Workspace,
        FsMode::Unrestricted => PathVerdict::Unrestricted,
        _ => PathVerdict::ReadOnly,
    }
}

/// Whether `path` is `p` or lies inside it, by its real path or as written.
pub fn under(path: &Path, p: &ResolvedPath) -> bool {
    path.starts_with(p.real()) || path.starts_with(&p.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::layers_with;

    fn verdict_of(policy: &Policy, at: &str) -> String {
        let git = |p: &Path| {
            p.starts_with("/repo/.git/hooks")
                .then(|| PathBuf::from("/repo/.git/hooks"))
        };
        format!("{:?}", of_path(policy, Path::new(at), &git))
    }

    #[test]
    fn a_denial_wins_then_protection_then_the_writable_places() {
        let (policy, _, _) = layers_with(
            "/ws",
            r#"{"filesystem": {"write": ["/data"], "deny": ["/ws/secret", "/data/keys"],
                "protect": ["/ws/.envrc"]}}"#,
        );
        let said = |at| verdict_of(&policy, at);
        assert!(
            said("/ws/secret/x").starts_with("Denied"),
            "{}",
            said("/ws/secret/x")
        );
        assert!(said("/data/keys/id").starts_with("Denied"));
        assert!(said("/ws/.envrc").starts_with("Protected"));
        assert!(said("/repo/.git/hooks/pre-commit").starts_with("GitPlace"));
        assert!(said("/data/file").starts_with("Writable"));
        assert_eq!(said("/ws/src/main.rs"), "Workspace");
        assert_eq!(said("/etc/passwd"), "ReadOnly");
    }
}
