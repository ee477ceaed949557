//! The sync policy ([`Fsync`], Redis's `appendfsync`): the one place that says when a commit
//! waits for the disk and when a background tick syncs.

use std::str::FromStr;

use crate::error::{Error, Result};

/// When a write is acknowledged, as Redis's `appendfsync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fsync {
    /// Acknowledge only after the record is on disk (`fdatasync`), with group commit. A crash
    /// or power loss loses nothing acknowledged.
    Always,
    /// Acknowledge once the record is written to the OS; sync every second. A process crash
    /// loses nothing acknowledged; a power loss at most about one second.
    #[default]
    EverySec,
    /// Acknowledge once written to the OS; never sync except at checkpoints and close. A process
    /// crash loses nothing acknowledged; a power loss may lose what the OS had not flushed.
    No,
}

impl Fsync {
    /// Whether a commit waits for its records to be synced (`always`): the one question every
    /// caller that acknowledges a write asks of the policy.
    pub fn commit_syncs(self) -> bool {
        self == Fsync::Always
    }

    /// Whether a background tick syncs the log every second (`everysec`).
    pub fn syncs_every_second(self) -> bool {
        self == Fsync::EverySec
    }

    /// The name users write: `always`, `everysec`, `no`.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }
}

impl FromStr for Fsync {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(Fsync::Always),
            "everysec" => Ok(Fsync::EverySec),
            "no" => Ok(Fsync::No),
            _ => Err(Error::InvalidOption {
                name: "fsync",
                reason: format!("{s:?} is not one of always, everysec, no"),
            }),
        }
    }
}

impl std::fmt::Display for Fsync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
