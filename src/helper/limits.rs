//! Resource limits the helper sets on itself before exec (inherited by everything the
//! program starts). The open-file raise is best effort; a limit that was asked for and
//! cannot be set is an error, never silently skipped.

use nix::sys::resource::{getrlimit, setrlimit, Resource};
use thiserror::Error;

use super::os::NOFILE_CAP;
use super::spec::ProcessLimits;

/// A limit that was asked for and cannot be set.
#[derive(Debug, Error)]
pub enum LimitError {
    #[error("getrlimit {name}: {source}")]
    Get {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("setrlimit {name} {value}: {source}")]
    Set {
        name: &'static str,
        value: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot set {name} to {value}: the hard limit is {hard}\nHint: ask for at most {hard}, or raise the hard limit first (ulimit -H)")]
    AboveHard {
        name: &'static str,
        value: u64,
        hard: u64,
    },
    #[error("cannot set RLIMIT_CPU to {seconds}: the hard limit is {hard}\nHint: ask for less than {hard}")]
    CpuAtHard { seconds: u64, hard: u64 },
}

/// The soft open-file limit the child should get: the hard limit, clamped to what this
/// platform's setrlimit accepts. None when there is nothing to raise.
pub fn nofile_target(soft: u64, hard: u64, platform_cap: Option<u64>) -> Option<u64> {
    let target = platform_cap.map_or(hard, |cap| hard.min(cap));
    (target > soft).then_some(target)
}

/// Set the limits (this process, and what it starts).
pub fn apply(limits: &ProcessLimits) -> Result<(), LimitError> {
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if let Some(count) = limits.open_files {
            setrlimit(Resource::RLIMIT_NOFILE, count.min(hard), hard)
                .map_err(set_error("RLIMIT_NOFILE", count))?;
        } else if limits.raise_nofile {
            if let Some(target) = nofile_target(soft, hard, NOFILE_CAP) {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, target, hard);
            }
        }
    }
    if let Some(seconds) = limits.cpu_seconds {
        // SIGXCPU at the limit, SIGKILL one second later if it is caught or ignored.
        let (_, hard) = getrlimit(Resource::RLIMIT_CPU).map_err(get_error("RLIMIT_CPU"))?;
        if seconds >= hard {
            return Err(LimitError::CpuAtHard { seconds, hard });
        }
        setrlimit(Resource::RLIMIT_CPU, seconds, (seconds + 1).min(hard))
            .map_err(set_error("RLIMIT_CPU", seconds))?;
    }
    if let Some(bytes) = limits.data_bytes {
        set_both(Resource::RLIMIT_DATA, "RLIMIT_DATA", bytes)?;
    }
    if let Some(count) = limits.processes {
        set_nproc(count)?;
    }
    if limits.no_core_dumps {
        set_both(Resource::RLIMIT_CORE, "RLIMIT_CORE", 0)?;
    }
    Ok(())
}

/// Soft and hard limit to `value`, which must not exceed the hard limit.
fn set_both(resource: Resource, name: &'static str, value: u64) -> Result<(), LimitError> {
    let (_, hard) = getrlimit(resource).map_err(get_error(name))?;
    if value > hard {
        return Err(LimitError::AboveHard { name, value, hard });
    }
    setrlimit(resource, value, value).map_err(set_error(name, value))
}

fn get_error(name: &'static str) -> impl Fn(nix::Error) -> LimitError {
    move |e| LimitError::Get {
        name,
        source: e.into(),
    }
}

fn set_error(name: &'static str, value: u64) -> impl Fn(nix::Error) -> LimitError {
    move |e| LimitError::Set {
        name,
        value,
        source: e.into(),
    }
}

/// RLIMIT_NPROC, soft and hard (nix has no name for it on macOS).
fn set_nproc(count: u64) -> Result<(), LimitError> {
    let name = "RLIMIT_NPROC";
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into `current`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut current) } == -1 {
        return Err(LimitError::Get {
            name,
            source: std::io::Error::last_os_error(),
        });
    }
    let hard: u64 = current.rlim_max;
    if count > hard {
        return Err(LimitError::AboveHard {
            name,
            value: count,
            hard,
        });
    }
    let wanted = libc::rlimit {
        rlim_cur: count,
        rlim_max: count,
    };
    // SAFETY: setrlimit reads one rlimit from `wanted`.
    if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &wanted) } == -1 {
        return Err(LimitError::Set {
            name,
            value: count,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_rises_to_the_hard_limit_within_the_platform_cap() {
        assert_eq!(nofile_target(1024, 524288, None), Some(524288));
        assert_eq!(nofile_target(256, u64::MAX, Some(10240)), Some(10240));
        assert_eq!(nofile_target(4096, 4096, None), None);
        assert_eq!(nofile_target(20000, u64::MAX, Some(10240)), None);
    }

    #[test]
    fn a_limit_above_the_hard_one_is_refused_with_a_hint() {
        let err = LimitError::AboveHard {
            name: "RLIMIT_DATA",
            value: 10,
            hard: 5,
        }
        .to_string();
        assert!(
            err.contains("the hard limit is 5") && err.contains("Hint: "),
            "{err}"
        );
    }
}
