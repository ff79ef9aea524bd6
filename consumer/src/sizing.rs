//! Will the page budget fit in memory? A check at the start of `neardup run`.
//!
//! The window's page budget (`--max-window-pages`, 4,000,000 by default) bounds the state, but
//! nothing tied it to the memory the process may use: under the Helm chart's default limit
//! (4 GiB) the default budget would be reached only after the container had been killed for
//! lack of memory, and killed again after each restart, as the state it restores is as large.
//! Measured on the benchmark's crawls (`checkpoint_bench`, which counts the live heap of the
//! whole topology state, as built by reading and as restored from its checkpoint), a windowed
//! page holds about 1.9 KB running and 1.6-1.7 KB restored (2.3-2.4 and 2.1-2.2 KB with
//! collections). Before the twenty-third session a restored state was the larger, up to 3.5 KB
//! with collections, as reading a checkpoint made a copy of a URL for every place that held it.
//! With the allocator's own overhead, [`BYTES_PER_PAGE`] is the estimate used here, kept at what
//! it was (its margin grew). It also covers what a checkpoint holds beside the state while its
//! file is written: a copy of the state that shares its URLs, 1.4-1.6 KB per windowed page
//! (before the twenty-fifth session, the checkpoint's bytes, about as many).
//!
//! When the process runs under a memory limit (a cgroup's, as in a container), `neardup run`
//! warns at start if the budget, at its fullest, would need more than the limit, and says which
//! budget would fit. It does not refuse to start: a crawl may never fill the budget, and the
//! estimate depends on the crawl (pages with many pairs or links hold more).

/// Estimated memory per windowed page, allocator overhead included (bytes).
pub const BYTES_PER_PAGE: u64 = 3_500;
/// Estimated memory of everything else but the sign cache: the Kafka clients' queues, records
/// in flight, the preparing threads' buffers (bytes; five runs over the medium crawl peaked at
/// 256-386 MiB, of which 52 MiB of state and 66 MiB of sign cache).
pub const BASE_BYTES: u64 = 384 << 20;

/// Estimated memory per windowed page: [`BYTES_PER_PAGE`], a fifth more with collections.
fn per_page(collections: bool) -> u64 {
    if collections {
        BYTES_PER_PAGE + BYTES_PER_PAGE / 5
    } else {
        BYTES_PER_PAGE
    }
}

/// The memory the state may need at its fullest: `max_pages` windowed pages, a full sign cache
/// (`sign_cache` bytes) and the rest.
pub fn estimate(max_pages: u64, sign_cache: u64, collections: bool) -> u64 {
    BASE_BYTES + sign_cache + max_pages.saturating_mul(per_page(collections))
}

/// The largest page budget whose [`estimate`] fits in `limit` bytes (0 if none does).
pub fn pages_within(limit: u64, sign_cache: u64, collections: bool) -> u64 {
    limit.saturating_sub(estimate(0, sign_cache, collections)) / per_page(collections)
}

/// The warning to give when the budget does not fit in `limit` bytes, if it does not.
pub fn advice(max_pages: u64, sign_cache: u64, collections: bool, limit: u64) -> Option<String> {
    let need = estimate(max_pages, sign_cache, collections);
    if need <= limit {
        return None;
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    Some(format!(
        "the page budget (--max-window-pages {max_pages}) may need about {:.1} GiB when the \
         window is full (about {} bytes a page, with a {} MiB sign cache), over this process's \
         memory limit of {:.1} GiB: set --max-window-pages (topology.max_window_pages) to at most \
         about {} or raise the limit, or the process will be killed for lack of memory once the \
         window fills, and again after each restart",
        gib(need),
        per_page(collections),
        sign_cache >> 20,
        gib(limit),
        pages_within(limit, sign_cache, collections),
    ))
}

/// Logs [`advice`] as a warning when the page budget of `cfg`, with a sign cache of
/// `sign_cache` bytes, does not fit in this process's cgroup memory limit (no limit: nothing).
pub fn warn_if_over_limit(cfg: &neardup_topology::Config, sign_cache: usize) {
    let advice = cgroup_limit().and_then(|limit| {
        advice(
            cfg.near.max_pages as u64,
            sign_cache as u64,
            cfg.collections,
            limit,
        )
    });
    if let Some(advice) = advice {
        tracing::warn!("{advice}");
    }
}

/// The memory limit of this process's cgroup, if it has one: the files its line in
/// `/proc/self/cgroup` names (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`), then those at
/// the mount's root (what a container with its own cgroup namespace sees as its own).
pub fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    limit_files(&own)
        .iter()
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|text| parse_limit(text.trim()))
}

/// The files that may hold the memory limit of the cgroups listed in `proc_self_cgroup`, most
/// specific first.
fn limit_files(proc_self_cgroup: &str) -> Vec<String> {
    let mut files = Vec::new();
    for line in proc_self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = match (parts.next(), parts.next(), parts.next()) {
            (Some(id), Some(c), Some(p)) => (id, c, p.trim_end_matches('/')),
            _ => continue,
        };
        if controllers.is_empty() {
            files.push(format!("/sys/fs/cgroup{path}/memory.max"));
        } else if controllers.split(',').any(|c| c == "memory") {
            files.push(format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes"));
        }
    }
    files.push("/sys/fs/cgroup/memory.max".into());
    files.push("/sys/fs/cgroup/memory/memory.limit_in_bytes".into());
    files
}

/// A cgroup limit file's content: a number of bytes, or `max` (none). cgroup v1 writes a huge
/// number (about 2^63) for none.
fn parse_limit(text: &str) -> Option<u64> {
    let n: u64 = text.parse().ok()?;
    (n < 1 << 60).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn the_default_budget_does_not_fit_the_charts_default_limit_and_the_advice_fits() {
        let cache = 256 << 20;
        let advice = advice(4_000_000, cache, false, 4 * GIB).expect("13 GiB > 4 GiB");
        assert!(advice.contains("--max-window-pages 4000000"), "{advice}");
        let fits = pages_within(4 * GIB, cache, false);
        assert!(
            advice.contains(&format!("at most about {fits}")),
            "{advice}"
        );
        // The budget it advises fits, one page more would not.
        assert!(estimate(fits, cache, false) <= 4 * GIB);
        assert!(estimate(fits + 1, cache, false) > 4 * GIB);
        assert_eq!(super::advice(fits, cache, false, 4 * GIB), None);
        assert!(super::advice(fits + 1, cache, false, 4 * GIB).is_some());
        // The chart's default budget fits its default limit, with or without collections.
        assert_eq!(super::advice(800_000, cache, false, 4 * GIB), None);
        assert_eq!(super::advice(800_000, cache, true, 4 * GIB), None);
        // Collections cost more per page.
        assert!(pages_within(4 * GIB, cache, true) < fits);
        // A limit under the fixed part fits no page at all.
        assert_eq!(pages_within(100 << 20, cache, false), 0);
    }

    #[test]
    fn the_limit_is_looked_for_in_the_process_own_cgroup_first() {
        let v1 = "9:name=systemd:/\n4:memory:/process_api/e774\n1:cpu:/\n0::/\n";
        assert_eq!(
            limit_files(v1)[..2],
            [
                "/sys/fs/cgroup/memory/process_api/e774/memory.limit_in_bytes",
                "/sys/fs/cgroup/memory.max",
            ]
        );
        let v2 = "0::/kubepods/burstable/pod1/abc\n";
        assert_eq!(
            limit_files(v2)[0],
            "/sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.max"
        );
        // In its own cgroup namespace a container is at the root.
        assert_eq!(limit_files("0::/\n")[0], "/sys/fs/cgroup/memory.max");
        assert_eq!(
            limit_files("")[..],
            [
                "/sys/fs/cgroup/memory.max",
                "/sys/fs/cgroup/memory/memory.limit_in_bytes"
            ]
        );
    }

    #[test]
    fn cgroup_limit_files_are_read_as_limits_or_none() {
        assert_eq!(parse_limit("4294967296"), Some(4 * GIB));
        assert_eq!(parse_limit("max"), None);
        assert_eq!(parse_limit("9223372036854771712"), None);
        assert_eq!(parse_limit(""), None);
    }
}
