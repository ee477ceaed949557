//! How much memory this process may actually use: the machine's RAM, unless a cgroup (a
//! container, a systemd unit) or an address-space limit (`ulimit -v`, `prlimit --as`) allows
//! less. `serve`'s default `--maxmemory` is three quarters of the smallest, so that filling
//! reservations meets `-ERR Insufficient memory` or `-OOM`, never a failed allocation that
//! aborts the process.

use std::path::Path;

/// Where a memory limit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The machine's RAM (`/proc/meminfo` `MemTotal`).
    PhysicalRam,
    /// A cgroup v2 `memory.max` of the process's cgroup or one of its ancestors.
    CgroupV2,
    /// A cgroup v1 `memory.limit_in_bytes`.
    CgroupV1,
    /// The process's address-space limit (`RLIMIT_AS`).
    RlimitAs,
}

impl Source {
    /// The name `INFO memory` shows (`urlseen_maxmemory_source`).
    pub fn name(self) -> &'static str {
        match self {
            Source::PhysicalRam => "physical_ram",
            Source::CgroupV2 => "cgroup_v2",
            Source::CgroupV1 => "cgroup_v1",
            Source::RlimitAs => "rlimit_as",
        }
    }
}

/// A limit at or above this is "no limit" (cgroup v1 writes `PAGE_COUNTER_MAX` pages in bytes,
/// about 2^63; `RLIM_INFINITY` is 2^64 - 1).
const UNLIMITED: u64 = 1 << 60;

/// The smallest memory limit that applies to this process, and where it comes from; `None`
/// where none is known (not Linux).
pub fn memory_limit() -> Option<(u64, Source)> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let root = Path::new("/sys/fs/cgroup");
    [
        super::total_ram().map(|b| (b, Source::PhysicalRam)),
        cgroup_v2_limit(&cgroup, root).map(|b| (b, Source::CgroupV2)),
        cgroup_v1_limit(&cgroup, &root.join("memory")).map(|b| (b, Source::CgroupV1)),
        rlimit_as().map(|b| (b, Source::RlimitAs)),
    ]
    .into_iter()
    .flatten()
    .filter(|&(bytes, _)| bytes > 0 && bytes < UNLIMITED)
    .min_by_key(|&(bytes, _)| bytes)
}

/// The smallest `memory.max` of the process's cgroup v2 (the `0::PATH` line of
/// `/proc/self/cgroup`) and its ancestors, under the v2 hierarchy mounted at `root`. Inside a
/// container the hierarchy is usually mounted at the container's own cgroup, so the file at
/// `root` itself is read too.
fn cgroup_v2_limit(proc_self_cgroup: &str, root: &Path) -> Option<u64> {
    let path = proc_self_cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mut dirs: Vec<std::path::PathBuf> = Vec::new();
    let mut dir = Some(Path::new(path.trim()));
    while let Some(d) = dir {
        let rel = d.strip_prefix("/").unwrap_or(d);
        dirs.push(root.join(rel));
        dir = d.parent();
    }
    dirs.push(root.to_owned());
    dirs.iter().filter_map(|d| read_limit(&d.join("memory.max"))).min()
}

/// The `memory.limit_in_bytes` of the process's cgroup v1 memory controller (the line of
/// `/proc/self/cgroup` that names `memory`), under the hierarchy mounted at `mount`, or of
/// `mount` itself (a container's own cgroup).
fn cgroup_v1_limit(proc_self_cgroup: &str, mount: &Path) -> Option<u64> {
    let path = proc_self_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == "memory").then_some(path)
    })?;
    let rel = path.trim().trim_start_matches('/');
    [mount.join(rel), mount.to_owned()]
        .iter()
        .filter_map(|d| read_limit(&d.join("memory.limit_in_bytes")))
        .min()
}

/// A limit file's number of bytes; `None` for `max`, a missing file or anything else.
fn read_limit(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The soft `RLIMIT_AS` of this process (`ulimit -v`), if finite.
#[cfg(unix)]
fn rlimit_as() -> Option<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    #[expect(unsafe_code, reason = "getrlimit is a foreign function")]
    // SAFETY: getrlimit writes one `rlimit` through a pointer to a live, writable value.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } == 0;
    // `rlim_t` is a u64 on Linux and the BSDs.
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn rlimit_as() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a failed unwrap is a failed test")]
    use super::*;

    #[test]
    fn cgroup_v2_takes_the_smallest_limit_of_the_cgroup_and_its_ancestors() {
        let root = tempfile::tempdir().unwrap();
        let leaf = root.path().join("a/b");
        std::fs::create_dir_all(&leaf).unwrap();
        std::fs::write(leaf.join("memory.max"), "max\n").unwrap();
        std::fs::write(root.path().join("a/memory.max"), "3000000000\n").unwrap();
        assert_eq!(cgroup_v2_limit("0::/a/b\n", root.path()), Some(3_000_000_000));
        std::fs::write(leaf.join("memory.max"), "1000\n").unwrap();
        assert_eq!(cgroup_v2_limit("0::/a/b\n", root.path()), Some(1000));
        // No v2 line (a v1-only system): none.
        assert_eq!(cgroup_v2_limit("4:memory:/a\n", root.path()), None);
    }

    #[test]
    fn cgroup_v1_reads_the_memory_controllers_cgroup() {
        let mount = tempfile::tempdir().unwrap();
        let own = mount.path().join("job/7");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(mount.path().join("memory.limit_in_bytes"), "9223372036854771712\n")
            .unwrap();
        std::fs::write(own.join("memory.limit_in_bytes"), "2147483648\n").unwrap();
        let cgroup = "5:cpu,cpuacct:/other\n4:memory:/job/7\n0::/\n";
        assert_eq!(cgroup_v1_limit(cgroup, mount.path()), Some(2_147_483_648));
        // The container's own cgroup mounted at the root: the root's value.
        std::fs::remove_file(own.join("memory.limit_in_bytes")).unwrap();
        assert_eq!(cgroup_v1_limit(cgroup, mount.path()), Some(9_223_372_036_854_771_712));
        assert_eq!(cgroup_v1_limit("0::/\n", mount.path()), None);
    }

    #[test]
    fn the_limit_is_the_smallest_known_and_never_above_the_ram() {
        let (bytes, _) = memory_limit().unwrap();
        assert!(bytes <= super::super::total_ram().unwrap());
        assert!(bytes > 0 && bytes < UNLIMITED);
    }
}
