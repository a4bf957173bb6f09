//! What the container backends show of the host (`sandbox::container`): the entries of its
//! `/` and the symlinks among them, and who this process is.

use std::io;
use std::path::PathBuf;

/// The host's symlinks at `/`: name and target.
pub type Links = Vec<(String, PathBuf)>;

/// The host's `/`: its entries but symlinks (full paths, sorted), and its symlinks.
pub fn entries() -> io::Result<(Vec<PathBuf>, Links)> {
    let mut top = Vec::new();
    let mut links = Vec::new();
    for entry in std::fs::read_dir("/")?.flatten() {
        let path = entry.path();
        match std::fs::read_link(&path) {
            Ok(target) => links.push((entry.file_name().to_string_lossy().into_owned(), target)),
            Err(_) => top.push(path),
        }
    }
    top.sort();
    links.sort();
    Ok((top, links))
}

/// This process's user, group and supplementary groups, which the program keeps in the
/// container.
pub fn ids() -> (u32, u32, Vec<u32>) {
    (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
        groups(),
    )
}

#[cfg(target_os = "linux")]
fn groups() -> Vec<u32> {
    nix::unistd::getgroups()
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.as_raw())
        .collect()
}

/// Elsewhere there is no container backend.
#[cfg(not(target_os = "linux"))]
fn groups() -> Vec<u32> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_root_is_listed_with_its_links_apart() {
        let (top, links) = super::entries().unwrap();
        assert!(top.iter().any(|p| p.as_os_str() == "/proc"), "{top:?}");
        assert!(links
            .iter()
            .all(|(name, _)| !top.iter().any(|p| p.ends_with(name))));
    }
}
