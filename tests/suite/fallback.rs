//! Landlock alone, the backend `auto` falls back to where bubblewrap cannot run, held to
//! what the bwrap backend gives (issue 16): each attack on both backends, as root and as
//! nobody, beside an unconfined control (`--backend none`) that shows it works without
//! sbx-shell.

use std::fs;
use std::path::Path;

use super::sandbox::{assert_lines, each, tools_present, Lab, User};

/// The host's /tmp and /dev/shm: a file there is not readable, nothing written lands there;
/// the program's temporary directory is its session's own and gone afterwards.
#[test]
fn the_temporary_area_is_the_sessions_own() {
    if !tools_present() {
        return;
    }
    let canary = Path::new("/tmp/sbx-fallback-canary");
    fs::write(canary, "HOST-TMP-CANARY\n").unwrap();
    let script = r#"
        echo "TMPDIR=$TMPDIR"
        echo x > "${TMPDIR:-/tmp}/own" && echo OWN-TMP-OK
        cat /tmp/sbx-fallback-canary 2>/dev/null || echo HOST-TMP-UNREADABLE
        echo x > "/tmp/sbx-fallback-$LAB_TAG" 2>/dev/null
        echo x > "/dev/shm/sbx-fallback-$LAB_TAG" 2>/dev/null
        ls /dev/shm >/dev/null 2>&1 && [ -e /dev/shm/sbx-fallback-host ] && echo HOST-SHM-SEEN
        true
    "#;
    let shm_canary = Path::new("/dev/shm/sbx-fallback-host");
    fs::write(shm_canary, "x").unwrap();
    let leaks = |tag: &str| {
        [
            format!("/tmp/sbx-fallback-{tag}"),
            format!("/dev/shm/sbx-fallback-{tag}"),
        ]
    };
    each(|backend, user| {
        let lab = Lab::new("tmp", user, false);
        let what = lab.what(backend);
        let tag = format!("{backend}-{user:?}");
        let mut cmd = lab.command(backend, &["-c", script]);
        let out = cmd.env("LAB_TAG", &tag).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_lines(&text, &["OWN-TMP-OK", "HOST-TMP-UNREADABLE"], &what);
        assert!(!text.contains("HOST-SHM-SEEN"), "{what}: {text}");
        for leak in leaks(&tag) {
            assert!(
                !Path::new(&leak).exists(),
                "{what}: {leak} reached the host"
            );
        }
        let temp = text
            .lines()
            .find_map(|l| l.strip_prefix("TMPDIR="))
            .unwrap_or_default();
        if backend == "landlock" {
            assert!(temp.starts_with("/tmp/sbx-shell-"), "{what}: {temp:?}");
            assert!(!Path::new(temp).exists(), "{what}: {temp} left behind");
        }
    });
    // Control: unconfined, the host's /tmp and /dev/shm are read and written.
    let lab = Lab::new("tmp-control", User::Root, false);
    let out = lab
        .command("none", &["-c", script])
        .env("LAB_TAG", "control")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("HOST-TMP-CANARY"), "control: {text}");
    assert!(text.contains("HOST-SHM-SEEN"), "control: {text}");
    for leak in leaks("control") {
        assert!(Path::new(&leak).exists(), "control: {leak}");
        fs::remove_file(leak).unwrap();
    }
    fs::remove_file(canary).unwrap();
    fs::remove_file(shm_canary).unwrap();
}
