//! Landlock alone: the pools of the carved directories (`sandbox::carve`). For each, empty
//! files and directories made before the program starts, on the directory's own mount —
//! in `STATE/pool/PID-N` when sbx-shell's state directory is there, else in the directory
//! itself as `.sbx-shell-pool-PID` — each given a read-write rule; the guard renames one
//! into place when the program makes a name at the carved directory's top
//! (`mediator::pool`). What is left is removed when the session ends; what a session that
//! did not end left is removed by the next one (`session::claim`: each holder's lock sits
//! beside it).

use std::fs::DirBuilder;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use super::claim::{remove_tree, Claim, Claims};
use crate::sandbox::carve::{Carved, Pool, POOLS_AT_MOST, POOL_DIRS, POOL_FILES};

/// The holders this session made: removed, with what is left in them, when dropped.
#[derive(Debug, Default)]
pub struct Pools {
    holders: Vec<Claim>,
}

/// The name of a pool's holder inside a carved directory.
const IN_DIR: &str = ".sbx-shell-pool-";

impl Pools {
    /// A pool for each carved directory where one can be made, `POOLS_AT_MOST` at most
    /// (none where neither the state directory nor the directory itself takes one: names
    /// made at its top then have no rule of their own).
    pub fn make(carved: &[Carved], state: &Path) -> (Pools, Vec<Pool>) {
        let pid = std::process::id();
        let base = state.join("pool");
        let base_mount = crate::sys::files::create_private_dir(&base)
            .and_then(|()| crate::sys::files::mount_id(&base))
            .ok();
        let mut pools = Pools::default();
        let mut made = Vec::new();
        let holder_dir = |p: &Path| DirBuilder::new().mode(0o700).create(p);
        for (n, c) in carved.iter().take(POOLS_AT_MOST).enumerate() {
            let Ok(mount) = crate::sys::files::mount_id(&c.dir) else {
                continue;
            };
            let taken = match base_mount == Some(mount) {
                true => {
                    Claims::beside(&base, "", remove_tree).take(&format!("{pid}-{n}"), &holder_dir)
                }
                false => Claims::beside(&c.dir, IN_DIR, remove_tree)
                    .take(&format!("{IN_DIR}{pid}"), &holder_dir),
            };
            let Ok(holder) = taken else {
                continue;
            };
            if let Ok(pool) = fill(&c.dir, holder.path()) {
                made.push(pool);
            }
            pools.holders.push(holder);
        }
        (pools, made)
    }
}

/// `holder` filled: empty 0600 files, empty 0700 directories.
fn fill(dir: &Path, holder: &Path) -> std::io::Result<Pool> {
    let files: Vec<String> = (0..POOL_FILES).map(|i| format!("f{i}")).collect();
    let dirs: Vec<String> = (0..POOL_DIRS).map(|i| format!("d{i}")).collect();
    for f in &files {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(holder.join(f))?;
    }
    for d in &dirs {
        DirBuilder::new().mode(0o700).create(holder.join(d))?;
    }
    Ok(Pool {
        dir: dir.to_path_buf(),
        holder: holder.to_path_buf(),
        files,
        dirs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_are_made_on_the_carved_directorys_mount_and_removed_at_the_end() {
        let base = std::env::temp_dir().join(format!("sbx-pool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (state, home) = (base.join("state"), base.join("home"));
        std::fs::create_dir_all(&home).unwrap();
        // A dead session's leftovers, in the state directory (its lock free).
        std::fs::create_dir_all(state.join("pool/4194999-0/d0")).unwrap();
        std::fs::write(state.join("pool/4194999-0.lock"), "").unwrap();
        let carved = [Carved {
            dir: home.clone(),
            left_out: vec![home.join(".aws")],
        }];
        let (pools, made) = Pools::make(&carved, &state);
        assert_eq!(made.len(), 1);
        let pool = &made[0];
        assert_eq!(
            pool.holder,
            state.join(format!("pool/{}-0", std::process::id()))
        );
        assert_eq!((pool.files.len(), pool.dirs.len()), (POOL_FILES, POOL_DIRS));
        assert!(pool.entries().all(|e| e.exists()));
        assert!(
            !state.join("pool/4194999-0").exists(),
            "a dead session's pool is swept"
        );
        drop(pools);
        assert!(!pool.holder.exists());
        assert!(!state
            .join(format!("pool/{}-0.lock", std::process::id()))
            .exists());
        let _ = std::fs::remove_dir_all(&base);
    }
}
