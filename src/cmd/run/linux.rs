//! The run's Linux-only wiring, behind one gate (`other.rs` stands in elsewhere): the
//! executable the helper runs from, Landlock's refusals, and the notes only Linux has to
//! give.

use std::path::PathBuf;

use anyhow::Context as _;

use super::argv::HelperExe;
use super::context::Run;
use super::prepare::Plan;
use crate::protect::repos::Repos;
use crate::sandbox;
use crate::sandbox::rootas::RootAs;
use crate::sys::exit::Failure;

/// The executable the helper runs from: `/proc/self/exe`, the running file even when its
/// path was deleted or now names another file (the kernel then marks the link's text);
/// a deleted one is opened to be copied by the launcher.
pub(super) fn helper_exe() -> Result<HelperExe, Failure> {
    use std::os::unix::ffi::OsStrExt;
    const EXE: &str = "/proc/self/exe";
    let deleted = std::fs::read_link(EXE)
        .map(|p| p.as_os_str().as_bytes().ends_with(b" (deleted)"))
        .unwrap_or(true);
    let how = if deleted {
        nix::fcntl::OFlag::O_RDONLY
    } else {
        nix::fcntl::OFlag::O_PATH
    };
    // Not close-on-exec: the launcher inherits it.
    let fd = nix::fcntl::open(EXE, how, nix::sys::stat::Mode::empty())
        .context("cannot open the sbx-shell executable (/proc/self/exe)")?;
    Ok(HelperExe {
        path: PathBuf::from(EXE),
        fd: Some((fd, deleted)),
    })
}

/// Where Landlock runs and can log (ABI 7), the kernel's audit is on and readable here,
/// and the session has its journal: read the program's refusals from the audit
/// (`session::audit`), the journal being the marker the program's domain refuses first.
/// Elsewhere, `--verbose` says why not.
pub(super) fn read_landlock_refusals(run: &Run, layers: &mut crate::sandbox::InProcess) {
    let (journal, say) = (&run.journal, run.say);
    let (Some(ruleset), Some(marker)) = (layers.landlock.as_mut(), journal.path()) else {
        return;
    };
    if run
        .host
        .machine
        .landlock_abi
        .as_ref()
        .is_ok_and(|abi| *abi < 7)
    {
        return say.detail(
            "sbx-shell: Landlock's refusals are not listed: it logs none before Linux 6.15 (ABI 7)",
        );
    }
    let reader = match crate::session::audit::AuditReader::open() {
        Ok(reader) => reader,
        Err(why) => {
            return say.detail(&format!(
                "sbx-shell: Landlock's refusals (reads) are not listed: {why}"
            ))
        }
    };
    let grounds = run.grounds();
    let judge = move |blockers: &[String], path: &std::path::Path| {
        grounds.of_landlock(crate::session::audit::reads(blockers), blockers, path)
    };
    // As the kernel names it: with every symlink on the way resolved.
    let marker = std::fs::canonicalize(marker).unwrap_or_else(|_| marker.to_path_buf());
    match journal.read_landlock(reader, marker.clone(), judge) {
        Ok(()) => ruleset.audit_marker = Some(marker),
        Err(e) => say.detail(&format!("sbx-shell: cannot read Landlock's refusals: {e}")),
    }
}

/// The start line for protected files that have other names, when the guard judges names.
pub(super) fn note_linked(run: &Run, layers: &sandbox::InProcess, git: &Repos) {
    if layers.names.is_none() {
        return;
    }
    let linked = sandbox::linked_protected_files(&run.plan.policy, &git.git_dirs);
    if let Some(line) = linked_note(&linked) {
        run.say.note(&line);
    }
}

/// The start line for protected files that have other names (hard links): each name is
/// refused a write as the file's own is.
fn linked_note(linked: &[PathBuf]) -> Option<String> {
    let named = crate::sys::say::first_and_more(linked)?;
    let has = match linked.len() {
        1 => "has another name",
        _ => "have other names",
    };
    Some(format!(
        "sbx-shell: {named} {has} (hard links): a write through any name is refused, as through the file's own"
    ))
}

/// Whether root's program runs as another host id, and the namespace it enters: for root,
/// under bwrap, unless the whole file system is writable (then nothing is root's only),
/// where the kernel can id-map each writable place and a tmpfs. `Ok(None)`: not asked of
/// this session; an error: asked, and not possible on this machine (why).
pub(super) fn root_as(
    policy: &crate::policy::Policy,
    backend: &crate::sandbox::Backend,
) -> anyhow::Result<Option<RootAs>> {
    use anyhow::{bail, Context as _};
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    use std::os::fd::AsFd;
    let fs = &policy.filesystem;
    let roots = fs.writable_roots();
    let bwrap = matches!(backend, crate::sandbox::Backend::Bwrap { .. });
    if !bwrap || roots.contains(&std::path::Path::new("/")) {
        return Ok(None);
    }
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let id = crate::sandbox::rootas::unused_id(
        &read("/etc/passwd"),
        &read("/etc/group"),
        &read("/etc/subuid"),
        &read("/etc/subgid"),
    );
    let userns = crate::sys::userns::mapped_root(id).context("no user namespace")?;
    // What the program writes must be root's: each writable place id-mapped, or no switch.
    let mut written: Vec<PathBuf> = roots.iter().map(|r| r.to_path_buf()).collect();
    written.push(fs.home.real().to_path_buf());
    for top in sandbox::rootas::outermost(written)
        .iter()
        .filter(|t| t.exists())
    {
        match crate::sys::userns::idmapped_clone(top, userns.as_fd()) {
            Ok((_, true)) => {}
            Ok((_, false)) => bail!(
                "{} is on a file system that cannot be id-mapped",
                top.display()
            ),
            Err(e) => bail!("{} cannot be id-mapped: {e}", top.display()),
        }
    }
    if !crate::sys::userns::tmpfs_idmaps(userns.as_fd()).context("no tmpfs")? {
        bail!("a tmpfs cannot be id-mapped (Linux 6.3)");
    }
    Ok(Some(RootAs { userns, id }))
}

/// Landlock alone: the pools of the directories carved in the writable trees
/// (`session::pool`), each entry given a read-write rule; removed when dropped.
pub(super) fn make_pools(
    plan: &Plan,
    layers: &mut sandbox::InProcess,
) -> crate::session::pool::Pools {
    use crate::sandbox::landlock::{Access, PathRule};
    let Some(ruleset) = layers.landlock.as_mut().filter(|r| !r.carved.is_empty()) else {
        return Default::default();
    };
    let state = crate::sys::files::state_dir(&plan.home);
    let (pools, made) = crate::session::pool::Pools::make(&ruleset.carved, &state);
    for pool in &made {
        let rules = pool.entries().map(|path| PathRule {
            path,
            access: Access::ReadWrite,
        });
        ruleset.rules.extend(rules);
    }
    ruleset.pools = made;
    pools
}
