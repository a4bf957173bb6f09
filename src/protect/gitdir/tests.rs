use super::*;
use std::path::Path;

#[test]
fn markers_make_a_git_directory_with_one_another() {
    let with = |names: &'static [&'static str]| move |n: &str| names.contains(&n);
    assert!(is_git_dir(None, with(&["HEAD", "objects", "refs"])));
    assert!(is_git_dir(None, with(&["HEAD", "commondir"])));
    assert!(is_git_dir(Some(OsStr::new(".git")), with(&[])));
    assert!(!is_git_dir(None, with(&["HEAD", "objects"])));
    assert!(!is_git_dir(None, with(&["objects", "refs", "commondir"])));
    // The last marker made completes it; one made in a git directory does not.
    let head = OsStr::new("HEAD");
    assert!(completes(None, head, with(&["objects", "refs"])));
    assert!(completes(None, OsStr::new("commondir"), with(&["HEAD"])));
    assert!(completes(
        None,
        OsStr::new("refs"),
        with(&["HEAD", "objects"])
    ));
    assert!(!completes(None, head, with(&["objects"])));
    assert!(!completes(None, head, with(&["HEAD", "commondir"])));
    assert!(!completes(
        None,
        OsStr::new("config"),
        with(&["HEAD", "objects"])
    ));
    assert!(!completes(
        Some(OsStr::new(".git")),
        head,
        with(&["objects", "refs"])
    ));
}

/// How an entry of a generated layout is made.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Missing,
    File(&'static str),
    Dir,
    /// A symlink to this target (relative to the directory).
    Link(&'static str),
}

fn make(dir: &Path, name: &str, kind: Kind) {
    let at = dir.join(name);
    match kind {
        Kind::Missing => {}
        Kind::File(text) => std::fs::write(at, text).unwrap(),
        Kind::Dir => std::fs::create_dir(at).unwrap(),
        Kind::Link(target) => std::os::unix::fs::symlink(target, at).unwrap(),
    }
}

/// Whether git accepts `dir` as a git directory (`--git-dir` fails on one it does not).
fn git_accepts(dir: &Path) -> bool {
    std::process::Command::new("git")
        .arg(format!("--git-dir={}", dir.display()))
        .args(["rev-parse", "--git-dir"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Over generated layouts (each marker missing, a file, a directory, a symlink; `HEAD`
/// valid or not; `commondir` leading to a full repository or nowhere): every directory
/// git accepts is one here, so the rules never judge what git trusts as an ordinary
/// directory. (Here is more than git: a `HEAD` git finds invalid counts.)
#[test]
fn every_directory_git_accepts_is_a_git_directory_here() {
    if !crate::policy::test_support::git_present("the differential test of what a git directory is")
    {
        return;
    }
    let root = std::env::temp_dir().join(format!("sbx-gitdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("store/objects")).unwrap();
    std::fs::create_dir_all(root.join("common/objects")).unwrap();
    std::fs::create_dir_all(root.join("common/refs")).unwrap();
    std::fs::write(root.join("common/HEAD"), "ref: refs/heads/main\n").unwrap();
    let heads = [
        Kind::Missing,
        Kind::File("ref: refs/heads/main\n"),
        Kind::File("0123456789012345678901234567890123456789\n"),
        Kind::File("not a ref\n"),
        Kind::Dir,
        Kind::Link("refs/heads/main"),
    ];
    let stores = [
        Kind::Missing,
        Kind::Dir,
        Kind::File(""),
        Kind::Link("../store/objects"),
    ];
    let commondirs = [
        Kind::Missing,
        Kind::File("../common\n"),
        Kind::File("../nowhere\n"),
    ];
    // Every layout made first; git asked about them from a few threads at once (the time
    // goes to starting a git per layout).
    let mut layouts = Vec::new();
    for head in heads {
        for objects in stores {
            for refs in [Kind::Missing, Kind::Dir, Kind::File("")] {
                for commondir in commondirs {
                    let dir = root.join(format!("d{}", layouts.len()));
                    std::fs::create_dir(&dir).unwrap();
                    make(&dir, "HEAD", head);
                    make(&dir, "objects", objects);
                    make(&dir, "refs", refs);
                    make(&dir, "commondir", commondir);
                    let ours =
                        is_git_dir(dir.file_name(), |m| dir.join(m).symlink_metadata().is_ok());
                    let what = format!("{head:?} {objects:?} {refs:?} {commondir:?}");
                    layouts.push((dir, what, ours));
                }
            }
        }
    }
    let n = layouts.len();
    let accepted: usize = std::thread::scope(|scope| {
        let shares: Vec<_> = layouts
            .chunks(n.div_ceil(8))
            .map(|share| {
                scope.spawn(move || {
                    let mut accepted = 0;
                    for (dir, what, ours) in share {
                        if git_accepts(dir) {
                            accepted += 1;
                            assert!(ours, "git accepts {what}");
                        }
                    }
                    accepted
                })
            })
            .collect();
        shares.into_iter().map(|s| s.join().unwrap()).sum()
    });
    let _ = std::fs::remove_dir_all(&root);
    // The layouts exercised both answers of git.
    assert!(accepted > 10 && accepted < n, "{accepted} of {n}");
}
