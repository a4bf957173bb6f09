//! What this machine and this session's place on it are: measured once per run, here only,
//! and read by everything that decides or builds from it — `sandbox::select` (which backend),
//! `doctor` (why, and the remedy), `explain` and the run (the sandbox builders' inputs).
//!
//! Two parts: `Machine`, the facts about the kernel and the installed tools that the backend
//! decision rests on, and `Place`, where this session runs (its directory, the temporary and
//! runtime directories, the host's sockets, what each path is). Measuring is cheap by default
//! (file reads and one syscall); `Probes::Run` also starts a probe sandbox, which `doctor`
//! asks for. Nothing here decides anything.

pub mod guardreach;
pub mod root;
pub mod sockets;
pub mod ssh;

mod bwrap;
pub use bwrap::{
    parse_bwrap_version, probe_cache, Probes, BWRAP_MOUNT_POINT_FIX, BWRAP_NAMESPACES, BWRAP_PATHS,
    SANDBOX_EXEC,
};

pub(crate) mod machine;
#[cfg(test)]
use machine::UserNamespaces;
pub use machine::{judges_names, kernel_release, Machine};

mod place;
pub use place::{children, PathKind, Place, RealFs};

/// The machine and the session's place on it.
#[derive(Debug)]
pub struct Host {
    pub machine: Machine,
    pub place: Place,
}

impl Host {
    /// Measure both parts, with `probes`.
    pub fn measure(probes: Probes<'_>) -> Host {
        Host {
            machine: Machine::measure(probes),
            place: Place::measure(),
        }
    }
}

#[cfg(test)]
pub mod test_support {
    use super::*;

    /// A Linux machine where every backend can run.
    pub fn capable_linux() -> Machine {
        Machine {
            os: "linux",
            kernel: "6.18.0".into(),
            root: false,
            landlock_abi: Ok(7),
            userns: UserNamespaces {
                unprivileged_clone: Some("1".into()),
                max: Some("15000".into()),
                apparmor_restrict: None,
            },
            bwrap: Some("/usr/bin/bwrap".into()),
            bwrap_probe: Some(Ok(())),
            bwrap_version: None,
            seccomp_mode: Some("0".into()),
            seccomp_listener: Ok(()),
            inside_sbx_shell: None,
            legacy_tiocsti: Some("0".into()),
            nofile: Some((1024, 524288)),
            sandbox_exec_probe: None,
            container: None,
            guard: None,
            docker: Some("/usr/bin/docker".into()),
            podman: Some("/usr/bin/podman".into()),
            engines: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bwrap::{probe_bwrap_as_asked, probe_key};
    use super::*;
    use crate::policy::PathResolver;
    use std::path::Path;

    fn userns(clone: Option<&str>, max: Option<&str>, apparmor: Option<&str>) -> UserNamespaces {
        UserNamespaces {
            unprivileged_clone: clone.map(String::from),
            max: max.map(String::from),
            apparmor_restrict: apparmor.map(String::from),
        }
    }

    #[test]
    fn user_namespaces_are_open_unless_a_sysctl_closes_them() {
        assert!(userns(None, None, None).open(false));
        assert!(userns(Some("1\n"), Some("15000\n"), Some("0\n")).open(false));
        assert!(!userns(Some("0\n"), None, None).open(false));
        assert!(!userns(None, Some("0"), None).open(false));
        assert!(!userns(None, None, Some("1")).open(false));
        assert!(userns(Some("0"), Some("0"), Some("1")).open(true));
    }

    #[test]
    fn real_paths_match_canonicalize_through_links_dots_and_missing_parts() {
        let dir = std::env::temp_dir().join(format!("sbx-realfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real/sub")).unwrap();
        std::fs::write(dir.join("real/sub/file"), "").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/file", dir.join("real/relative")).unwrap();
        std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
        let fs = RealFs::default();
        for tail in [
            "real/sub/file",
            "link/sub/file",
            "link/relative",
            "link/sub/../sub/file",
            "./link/./sub",
            "dangling",
            "missing/file",
            "real/sub/file/below",
            "link",
            "",
        ] {
            let path = dir.join(tail);
            // Twice: the second answer comes from what the first one remembered.
            for _ in 0..2 {
                assert_eq!(
                    fs.real_path(&path),
                    std::fs::canonicalize(&path).ok(),
                    "{tail}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_a_probe_success_is_remembered_and_only_for_the_same_machine_state() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sbx-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cache = dir.join("state/bwrap-probe");
        // A failing bwrap: probed, not remembered (and a stale success is dropped).
        std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
        std::fs::write(&cache, "stale\n").unwrap();
        assert!(probe_bwrap_as_asked(&fake, Probes::Cached(&cache)).is_some_and(|r| r.is_err()));
        assert!(!cache.exists());
        // A remembered success for exactly this state is taken without running anything.
        std::fs::write(&cache, probe_key(&fake)).unwrap();
        assert_eq!(
            probe_bwrap_as_asked(&fake, Probes::Cached(&cache)),
            Some(Ok(()))
        );
        // Fresh probes (doctor) always run; Skip runs nothing.
        assert!(
            probe_bwrap_as_asked(&fake, Probes::Fresh(Some(&cache))).is_some_and(|r| r.is_err())
        );
        assert_eq!(probe_bwrap_as_asked(&fake, Probes::Skip), None);
        // The key changes with the binary.
        let before = probe_key(&fake);
        std::fs::write(&fake, "#!/bin/sh\ntrue\n").unwrap();
        assert_ne!(probe_key(&fake), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn path_kinds_are_read_once_and_follow_links() {
        let place = Place::measure();
        assert_eq!(place.kind(Path::new("/")), PathKind::Dir);
        assert_eq!(place.kind(Path::new("/proc/self/status")), PathKind::File);
        assert_eq!(
            place.kind(Path::new("/nonexistent/sbx-shell")),
            PathKind::Missing
        );
    }
}
