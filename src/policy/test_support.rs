//! For tests of the backends: a policy resolved from the defaults and one extra layer, on a
//! filesystem where every path is its own real path.

use std::path::{Path, PathBuf};

use super::{defaults_layer, resolve, Layer, PathContext, PathResolver, Policy};

pub struct SameFs;

impl PathResolver for SameFs {
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        Some(path.to_path_buf())
    }
}

/// Home /home/u, the given workspace, defaults plus `extra` (JSON).
pub fn policy_with(workspace: &str, extra: &str) -> Policy {
    layers_with(workspace, extra).0
}

/// The same, with its layers (the extra one's origin is `test`) and the paths' context.
pub fn layers_with(workspace: &str, extra: &str) -> (Policy, Vec<Layer>, PathContext) {
    let layer = Layer {
        origin: "test".into(),
        config: crate::policy::config::from_str(extra, "test").unwrap(),
    };
    let ctx = PathContext {
        home: "/home/u".into(),
        workspace: workspace.into(),
        state: "/home/u/.local/state/sbx-shell".into(),
        config: "/home/u/.config/sbx-shell".into(),
        vars: Default::default(),
        ssh_client: Default::default(),
    };
    let layers = vec![defaults_layer(), layer];
    let policy = resolve("test", &layers, &ctx, &SameFs).unwrap();
    (policy, layers, ctx)
}

/// Whether git is on PATH for a differential test against it (`what` names the test):
/// when it is not, a failure under SBX_REQUIRE_ALL=1 (as in CI), else a loud skip.
pub fn git_present(what: &str) -> bool {
    if std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok()
    {
        return true;
    }
    assert!(
        std::env::var("SBX_REQUIRE_ALL").as_deref() != Ok("1"),
        "git is needed for {what}"
    );
    eprintln!("SKIPPED: no git on PATH for {what}");
    false
}
