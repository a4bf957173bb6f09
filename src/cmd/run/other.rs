//! Elsewhere than Linux (macOS), the run's Linux-only wiring stands in as nothing: the
//! helper runs from the executable's path.

use anyhow::Context as _;

use super::argv::HelperExe;
use super::context::Run;
use super::prepare::Plan;
use crate::protect::repos::Repos;
use crate::sys::exit::Failure;

/// The executable the helper runs from: its path.
pub(super) fn helper_exe() -> Result<HelperExe, Failure> {
    Ok(HelperExe {
        path: std::env::current_exe().context("cannot locate the sbx-shell executable")?,
        fd: None,
    })
}

/// No guard judges names here.
pub(super) fn note_linked(_run: &Run, _layers: &crate::sandbox::InProcess, _git: &Repos) {}

/// No Landlock here.
pub(super) fn read_landlock_refusals(_run: &Run, _layers: &mut crate::sandbox::InProcess) {}

/// Root's program as another host id: Linux only.
pub(super) fn root_as(
    _policy: &crate::policy::Policy,
    _backend: &crate::sandbox::Backend,
) -> anyhow::Result<Option<crate::sandbox::rootas::RootAs>> {
    Ok(None)
}

/// No Landlock here: nothing is carved, no pool is made (what stands for Linux's
/// `session::pool::Pools`).
pub(super) struct NoPools;

impl Drop for NoPools {
    fn drop(&mut self) {}
}

pub(super) fn make_pools(_plan: &Plan, _layers: &mut crate::sandbox::InProcess) -> NoPools {
    NoPools
}
