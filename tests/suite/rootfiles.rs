//! Root's program is not root on the host: under bwrap it runs as root of its own user
//! namespace, another host id, and the kernel refuses it every file only host root may
//! read; under Landlock alone the guard opens every file it reads and hands over only what
//! an ordinary user could read, by the kernel's check made as another id. Either way, made
//! before the session, during it, or made root-only in place, while the workspace stays
//! writable and what it makes there is host root's. Each run beside an unconfined control
//! that reads them all.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::sandbox::{assert_lines, tools_present, Lab, User};
use super::support::wait_until;

/// A directory of root's files outside every grant, removed on drop.
struct Planted(PathBuf);

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A directory `/srv/NAME-PID` with a root-only `before.key`, removed on drop.
fn secret_before(name: &str) -> Planted {
    let dir = PathBuf::from(format!("/srv/{name}-{}", std::process::id()));
    plant(&dir.join("before.key"), "SECRET-BEFORE", 0o600);
    Planted(dir)
}

fn plant(path: &Path, text: &str, mode: u32) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, format!("{text}\n")).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// One session of `backend`: it reads `inplace` (still readable), says it started, waits
/// for the host's changes, reads every file, then makes one in the workspace. Its output.
fn session(lab: &Lab, backend: &str, dir: &Path) -> String {
    for name in ["started", "go", "made"] {
        let _ = fs::remove_file(lab.ws.join(name));
    }
    plant(&dir.join("inplace"), "PUBLIC-THEN-SECRET", 0o644);
    let _ = fs::remove_file(dir.join("during.key"));
    let _ = fs::remove_dir_all(dir.join("new"));
    let d = dir.display();
    let script = format!(
        "cat {d}/inplace; echo > started; while [ ! -e go ]; do sleep 0.05; done; \
         for f in before.key inplace during.key new/deep.key; do cat {d}/$f 2>&1; done; \
         head -c1 /proc/mounts >/dev/null && head -c1 /proc/net/unix >/dev/null && echo PROC-LINKS-READ; \
         echo made > made && echo DONE"
    );
    let child = lab
        .command(backend, &["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the session to start", || {
        lab.ws.join("started").exists().then_some(())
    });
    // The host, while the session runs: a new root-only file, a new root-only file in a
    // new directory, and a readable file made root-only in place.
    plant(&dir.join("during.key"), "SECRET-DURING", 0o600);
    plant(&dir.join("new/deep.key"), "SECRET-NEW-DIR", 0o600);
    fs::set_permissions(dir.join("inplace"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(lab.ws.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A session of `backend` refused every file of `dir` only root may read — made before it,
/// during it, made root-only in place — and made a file in the workspace that is root's.
fn assert_root_only_refused(lab: &Lab, backend: &str, dir: &Path) {
    let out = session(lab, backend, dir);
    // `/proc/mounts` and `/proc/net` lead through `self`: the caller's, not the guard's.
    assert_lines(
        &out,
        &["PUBLIC-THEN-SECRET", "PROC-LINKS-READ", "DONE"],
        backend,
    );
    for secret in ["SECRET-BEFORE", "SECRET-DURING", "SECRET-NEW-DIR"] {
        assert!(
            !out.contains(secret),
            "{backend}: {secret} was read:\n{out}"
        );
    }
    assert_eq!(
        out.matches("PUBLIC-THEN-SECRET").count(),
        1,
        "{backend}: made root-only in place, still read:\n{out}"
    );
    assert_eq!(
        out.matches("Permission denied").count(),
        4,
        "{backend}: each refused:\n{out}"
    );
    let made = fs::metadata(lab.ws.join("made")).unwrap();
    assert_eq!(
        (made.uid(), made.gid()),
        (0, 0),
        "{backend}: the workspace's new file is not root's"
    );
    let readme = fs::metadata(lab.ws.join("README")).unwrap();
    assert_eq!(readme.uid(), 0, "{backend}: README's owner changed");
}

#[test]
fn root_only_files_stay_unreadable_made_before_during_or_in_place() {
    if !tools_present() {
        return;
    }
    let planted = secret_before("sbx-rootfiles");
    let dir = planted.0.clone();
    let lab = Lab::new("rootfiles", User::Root, false);
    let control = session(&lab, "none", &dir);
    assert_lines(
        &control,
        &[
            "PUBLIC-THEN-SECRET",
            "SECRET-BEFORE",
            "SECRET-DURING",
            "SECRET-NEW-DIR",
            "DONE",
        ],
        "control",
    );
    for backend in ["bwrap", "landlock"] {
        assert_root_only_refused(&lab, backend, &dir);
    }
    // What it sees of itself under bwrap: root, with host root's files its own in the
    // workspace, and the rest of the host's owners unknown to it.
    let backend = "bwrap";
    let (_, ids, err) = lab.sh(
        backend,
        &[],
        "id -u; stat -c %u README; stat -c %U /etc/passwd; chown 1:1 README 2>&1",
    );
    assert_lines(&ids, &["0", "0", "nobody"], &format!("{backend}: {err}"));
    assert!(
        ids.contains("Operation not permitted") || ids.contains("Invalid argument"),
        "{backend}: a chown to an id outside its namespace worked:\n{ids}"
    );
    // Refused by the kernel, not by a list of root's files: the session says so.
    let (_, _, said) = lab.sh(backend, &["-v"], "true");
    assert!(
        said.contains("root's program runs as root of its own user namespace"),
        "{backend}: {said}"
    );
    // Landlock alone: host root still, every open done by the guard, which hands over only
    // what any user may read (or what is granted): the session says so, and names each
    // refusal with the grant that allows it.
    let backend = "landlock";
    let (_, ids, err) = lab.sh(backend, &[], "id -u; stat -c %U /etc/passwd");
    assert_lines(&ids, &["0", "root"], &format!("{backend}: {err}"));
    let (_, _, said) = lab.sh(
        backend,
        &["-v"],
        &format!("cat {}/before.key", dir.display()),
    );
    assert!(
        said.contains("the guard opens each file it reads"),
        "{backend}: {said}"
    );
    assert!(
        said.contains(&format!("--read {}/before.key", dir.display())),
        "{backend}: the refusal is not named with its grant: {said}"
    );
}

/// Ways around the guard's look at root's reads under Landlock alone, each tried on a
/// root-only file outside the grants: a symlink in the workspace, a hard link into it, a
/// descriptor that reads nothing (`O_PATH`) opened again through `/proc/self/fd`, an open
/// relative to such a descriptor of its directory, a host process's view of the root
/// (`/proc/PID/root`), a listing of a root-only directory. Printed one line each.
const ROUTES: &str = r#"
import os, sys
key, hidden, host = sys.argv[1], sys.argv[2], sys.argv[3]
def tried(what, act):
    try:
        print(what, act().strip())
    except OSError as e:
        print(what, "REFUSED", e.errno)
def via_link():
    os.symlink(key, "sym")
    return open("sym").read()
def via_hard():
    os.link(key, "hard")
    return open("hard").read()
def via_fd():
    fd = os.open(key, os.O_PATH)
    return open("/proc/self/fd/%d" % fd).read()
def via_dir():
    d = os.open(os.path.dirname(key), os.O_PATH)
    return os.read(os.open(os.path.basename(key), os.O_RDONLY, dir_fd=d), 100).decode()
tried("SYMLINK", via_link)
tried("HARDLINK", via_hard)
tried("OPATH-REOPEN", via_fd)
tried("OPATH-DIR", via_dir)
tried("PROC-ROOT", lambda: open("/proc/%s/root%s" % (host, key)).read())
tried("LISTING", lambda: " ".join(os.listdir(hidden)) or "EMPTY")
"#;

/// Root's program under Landlock alone: every way around the guard's look is refused,
/// beside the same routes run bare, which read the file each time; and a `--read` grant
/// (consent) lets it read that file.
#[test]
fn root_only_files_stay_unreadable_by_every_route_under_landlock_alone() {
    if !tools_present() {
        return;
    }
    let dir = PathBuf::from(format!("/srv/sbx-rootroutes-{}", std::process::id()));
    let _planted = Planted(dir.clone());
    let key = dir.join("host.key");
    plant(&key, "SECRET-ROUTE", 0o600);
    plant(&dir.join("hidden/inner.txt"), "INNER", 0o644);
    fs::set_permissions(dir.join("hidden"), fs::Permissions::from_mode(0o700)).unwrap();
    let lab = Lab::new("rootroutes", User::Root, false);
    let mut host = std::process::Command::new("/bin/sleep")
        .arg("300.43")
        .spawn()
        .unwrap();
    let args = |backend: &'static str| {
        let mut cmd = lab.command(backend, &["--", "/usr/bin/python3", "-c", ROUTES]);
        cmd.arg(&key)
            .arg(dir.join("hidden"))
            .arg(host.id().to_string());
        cmd
    };
    let clean = || {
        for name in ["sym", "hard"] {
            let _ = fs::remove_file(lab.ws.join(name));
        }
    };
    clean();
    let control = String::from_utf8_lossy(&args("none").output().unwrap().stdout).into_owned();
    for route in [
        "SYMLINK",
        "HARDLINK",
        "OPATH-REOPEN",
        "OPATH-DIR",
        "PROC-ROOT",
    ] {
        assert!(
            control.contains(&format!("{route} SECRET-ROUTE")),
            "control {route}:\n{control}"
        );
    }
    assert!(control.contains("LISTING inner.txt"), "control:\n{control}");
    clean();
    let out = args("landlock").output().unwrap();
    let _ = host.kill();
    let _ = host.wait();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("SECRET-ROUTE"), "landlock:\n{text}\n{err}");
    assert!(!text.contains("inner.txt"), "landlock:\n{text}\n{err}");
    for route in [
        "SYMLINK",
        "HARDLINK",
        "OPATH-REOPEN",
        "OPATH-DIR",
        "PROC-ROOT",
        "LISTING",
    ] {
        assert!(
            text.contains(&format!("{route} REFUSED")),
            "landlock {route}:\n{text}\n{err}"
        );
    }
    clean();
    // Consent: a read grant of the file makes it root's to read again.
    let (_, granted, err) = lab.sh(
        "landlock",
        &["--read", &key.display().to_string()],
        &format!("cat {}", key.display()),
    );
    assert_lines(
        &granted,
        &["SECRET-ROUTE"],
        &format!("landlock --read: {err}"),
    );
}

/// The record an earlier version kept of its walk of the host (and a temporary name a
/// killed writer left beside it) is removed by root's next session: nothing reads it.
#[test]
fn the_walks_old_record_is_removed_by_roots_next_session() {
    if !tools_present() {
        return;
    }
    let cache = Path::new("/var/cache/sbx-shell");
    fs::create_dir_all(cache).unwrap();
    let (record, stray) = (
        cache.join("root-only.json"),
        cache.join(".root-only.4194999"),
    );
    for old in [&record, &stray] {
        fs::write(old, "sbx-shell root-only record 1\n").unwrap();
    }
    let lab = Lab::new("oldrecord", User::Root, false);
    let (code, _, err) = lab.sh("landlock", &[], "true");
    assert_eq!(code, 0, "{err}");
    assert!(
        !record.exists() && !stray.exists(),
        "the old record is left"
    );
}

/// A ramfs mounted for one test (it cannot be id-mapped), unmounted on drop.
struct Ramfs(PathBuf);

impl Ramfs {
    fn mount(at: &Path) -> Ramfs {
        let ok = std::process::Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(at)
            .status()
            .unwrap()
            .success();
        assert!(ok, "cannot mount a ramfs at {}", at.display());
        Ramfs(at.to_path_buf())
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Where a writable place cannot be id-mapped (a workspace on a ramfs), root's program
/// stays host root under bwrap too, and the guard judges what it reads as under Landlock
/// alone: every root-only file refused, the workspace's new files root's.
#[test]
fn root_only_files_stay_unreadable_where_bwrap_cannot_give_root_another_id() {
    if !tools_present() {
        return;
    }
    let planted = secret_before("sbx-rootfiles-ramfs");
    let dir = planted.0.clone();
    let lab = Lab::new("rootfiles-ramfs", User::Root, false);
    let _ramfs = Ramfs::mount(&lab.ws);
    fs::write(lab.ws.join("README"), "hello\n").unwrap();
    let control = session(&lab, "none", &dir);
    assert_lines(
        &control,
        &["SECRET-BEFORE", "SECRET-DURING", "DONE"],
        "control",
    );
    assert_root_only_refused(&lab, "bwrap", &dir);
    let (_, _, said) = lab.sh("bwrap", &["-v"], "true");
    assert!(
        said.contains("cannot be id-mapped") && said.contains("the guard opens each file it reads"),
        "{said}"
    );
}

/// No file the program makes or changes runs as its owner or group: root's would run as
/// host root for anyone. chmod, an open that makes a file, an unnamed file, mknod — each
/// beside an unconfined control that makes them all, and an ordinary mode still set.
#[test]
fn no_file_the_program_makes_is_set_user_or_group_id() {
    if !tools_present() {
        return;
    }
    let script = r#"
import os, stat
def tried(what, act):
    try:
        act()
        print(what, "MADE")
    except OSError as e:
        print(what, "REFUSED", e.errno)
open("plain", "w").close()
tried("chmod-suid", lambda: os.chmod("plain", 0o4755))
tried("chmod-sgid", lambda: os.chmod("plain", 0o2755))
fd = os.open("plain", os.O_RDONLY)
tried("fchmod-suid", lambda: os.fchmod(fd, 0o4755))
tried("open-suid", lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755)))
tried("tmpfile-suid", lambda: os.close(os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o6755)))
tried("mknod-suid", lambda: os.mknod("node", stat.S_IFREG | 0o4755))
tried("chmod-plain", lambda: os.chmod("plain", 0o755))
for name in ("plain", "made", "node"):
    try:
        mode = os.stat(name).st_mode
        print(name, "SETID" if mode & 0o6000 else "plain")
    except FileNotFoundError:
        pass
"#;
    let setid = [
        "chmod-suid",
        "chmod-sgid",
        "fchmod-suid",
        "open-suid",
        "tmpfile-suid",
        "mknod-suid",
    ];
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("setid", user, false);
        let (_, control, err) = lab.sh("none", &[], &format!("python3 -c '{script}'"));
        for what in setid {
            assert_lines(
                &control,
                &[&format!("{what} MADE")],
                &format!("control: {err}"),
            );
        }
        for backend in ["bwrap", "landlock"] {
            let what = lab.what(backend);
            for name in ["plain", "made", "node"] {
                let _ = fs::remove_file(lab.ws.join(name));
            }
            let (_, out, err) = lab.sh(backend, &[], &format!("python3 -c '{script}'"));
            for call in setid {
                assert_lines(
                    &out,
                    &[&format!("{call} REFUSED 1")],
                    &format!("{what}: {err}"),
                );
            }
            assert_lines(
                &out,
                &["chmod-plain MADE", "plain plain"],
                &format!("{what}: {err}"),
            );
            assert!(!out.contains("SETID"), "{what}:\n{out}");
        }
    }
}
