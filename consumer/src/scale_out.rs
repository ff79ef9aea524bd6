//! `neardup run --scale-out`: every stage of the split topology in one process, so that the
//! instances of one deployment share the work.
//!
//! The all-in-one stage cannot share its input between instances: its state joins pages of
//! every partition, so under `--lease` one instance runs it and the others stand by. Split into
//! stages, the part that costs the most, decoding and signing, keeps no state and splits the
//! input's partitions; what keeps state (the window, the clusters, the host pairs) reads the
//! internal topics in one instance at a time. A scale-out process runs each stage as the split
//! deployment's own process of that stage would (the same `kafka::run`, its own Kafka clients
//! and consumer group), on threads of its own:
//!
//! - `sign`, in the group GROUP, shares the input's partitions with the other instances;
//! - `index` (with `--key-shards`: `index`, `shard`, which shares the key shards' partitions,
//!   and `verify`), `cluster` (and `mirror` with `--mirror-stage`) each run under a lease of
//!   their own (GROUP.STAGE.lease): in one instance at a time, not necessarily the same one.
//!
//! The index stage merges the internal partitions by event time, waiting for the partitions
//! another instance's sign stage still fills (crate::upstream), so the outputs are the
//! all-in-one process's whichever instance signs what.
//!
//! Each stage's runtime and threads say which stage they work for
//! ([`crate::telemetry::set_stage`]), so its metrics carry the label `stage`; `/readyz` is ready
//! when every stage is; `/clusters` asks the cluster stage. When one stage fails, the others
//! are stopped (drained, committed) and the process exits 1, to be restarted whole.

use std::sync::Arc;

use anyhow::{anyhow, Context as _, Result};
use neardup_topology::Config;
use tokio::sync::{mpsc, watch};
use tracing::Instrument as _;

use crate::cli::{RunArgs, Stage};
use crate::http::ClusterQuery;
use crate::kafka::{self, RunOutcome};
use crate::telemetry::{self, Health};

/// The stages a scale-out process runs under `cfg`, in the topology's order.
pub fn stages(cfg: &Config) -> Vec<Stage> {
    let mut stages = vec![Stage::Sign, Stage::Index];
    if cfg.key_shards > 0 {
        stages.extend([Stage::Shard, Stage::Verify]);
    }
    stages.push(Stage::Cluster);
    if cfg.mirror_stage {
        stages.push(Stage::Mirror);
    }
    stages
}

/// The arguments `stage` runs with in a scale-out process of `args`: under the lease (where it
/// applies), and with checkpoints (where it keeps state) in a directory of its own under
/// `--checkpoint-dir`.
pub fn stage_args(args: &RunArgs, stage: Stage) -> RunArgs {
    let mut a = args.clone();
    a.stage = stage;
    a.scale_out = false;
    a.lease = true;
    a.checkpoint_dir = args
        .checkpoint_dir
        .as_ref()
        .filter(|_| stage.role().is_some())
        .map(|dir| dir.join(stage.name()));
    a
}

/// One stage of the process, before it runs.
pub struct StageRun {
    /// The stage.
    pub stage: Stage,
    /// Its readiness (`/readyz`).
    pub health: Arc<Health>,
}

/// The stages of a scale-out process of `args`, with their readiness. A stage that shares its
/// input's partitions (sign, shard) counts as ready without any: an instance beyond the
/// partitions' count stands by for a rebalance.
pub fn plan(args: &RunArgs) -> Vec<StageRun> {
    stages(&args.topology.config())
        .into_iter()
        .map(|stage| {
            let health = Arc::new(Health::default());
            if !stage.spans_partitions() {
                health
                    .standby
                    .store(true, std::sync::atomic::Ordering::Relaxed);
            }
            StageRun { stage, health }
        })
        .collect()
}

/// Runs `stages` of a scale-out process of `args` until `shutdown` turns true (or, with
/// `--exit-at-end`, until each has finished), each on a runtime and threads of its own; the
/// cluster stage answers `queries`. The first stage to fail stops the others (through
/// `stop`), and its error is returned once they have stopped. Returns each stage's outcome.
pub fn run(
    args: &RunArgs,
    stages: Vec<StageRun>,
    shutdown: watch::Receiver<bool>,
    stop: Arc<watch::Sender<bool>>,
    queries: mpsc::Receiver<ClusterQuery>,
) -> Result<Vec<(Stage, RunOutcome)>> {
    // Any instance may come to hold every stage's lease, and with it the whole state that the
    // all-in-one holds (and the sign stage's buffers besides).
    crate::sizing::warn_if_over_limit(&args.topology.config(), args.topology.sign_cache);
    let (done, finished) = std::sync::mpsc::channel();
    let mut queries = Some(queries);
    let mut threads = vec![];
    for StageRun { stage, health } in stages {
        let a = stage_args(args, stage);
        // Only the cluster stage is asked; the others get a channel nobody sends on.
        let (keep, unasked) = mpsc::channel(1);
        let asked = if stage.holds_clusters() {
            queries.take().unwrap_or(unasked)
        } else {
            unasked
        };
        let (done, shutdown) = (done.clone(), shutdown.clone());
        let name = stage.name();
        let thread = std::thread::Builder::new()
            .name(format!("neardup-{name}"))
            .spawn(move || {
                telemetry::set_stage(Some(name));
                // A panic must stop the others too, or they would run on without the stage.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .thread_name(format!("{name}-rt"))
                        .on_thread_start(move || telemetry::set_stage(Some(name)))
                        .enable_all()
                        .build()
                        .context("cannot start the stage's runtime")
                        .and_then(|rt| {
                            rt.block_on(
                                kafka::run(
                                    &(&a).into(),
                                    a.topology.config(),
                                    shutdown,
                                    asked,
                                    health,
                                )
                                .instrument(tracing::info_span!("stage", name)),
                            )
                        })
                }))
                .unwrap_or_else(|_| Err(anyhow!("the stage's thread panicked")));
                drop(keep);
                let _ = done.send((stage, outcome));
            })
            .with_context(|| format!("cannot start a thread for --stage {name}"))?;
        threads.push(thread);
    }
    drop(done);
    let mut outcomes = vec![];
    let mut failed: Option<anyhow::Error> = None;
    for (stage, outcome) in finished.iter() {
        match outcome {
            Ok(o) => outcomes.push((stage, o)),
            Err(e) => {
                if failed.is_none() {
                    tracing::error!(stage = stage.name(), error = %format!("{e:#}"), "a stage failed: stopping the others");
                    let _ = stop.send(true);
                    failed = Some(e.context(format!("--stage {}", stage.name())));
                }
            }
        }
    }
    for t in threads {
        t.join().map_err(|_| anyhow!("a stage's thread panicked"))?;
    }
    match failed {
        Some(e) => Err(e),
        None => {
            outcomes.sort_by_key(|(stage, _)| *stage as u8);
            Ok(outcomes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn run_args(extra: &[&str]) -> RunArgs {
        let mut argv = vec!["neardup", "run", "--brokers", "b:9092", "--scale-out"];
        argv.extend(extra);
        match crate::cli::Cli::try_parse_from(argv).unwrap().command {
            crate::cli::Command::Run(a) => a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn every_stage_the_topology_has_runs_under_the_lease_with_a_checkpoint_dir_of_its_own() {
        let plain = run_args(&["--checkpoint-dir", "/ck"]);
        let names = |a: &RunArgs| -> Vec<&str> {
            stages(&a.topology.config())
                .iter()
                .map(|s| s.name())
                .collect()
        };
        assert_eq!(names(&plain), ["sign", "index", "cluster"]);
        let more = run_args(&["--key-shards", "2", "--mirror-stage"]);
        assert_eq!(
            names(&more),
            ["sign", "index", "shard", "verify", "cluster", "mirror"]
        );
        let sign = stage_args(&plain, Stage::Sign);
        assert_eq!(sign.checkpoint_dir, None, "signing keeps no state");
        let index = stage_args(&plain, Stage::Index);
        assert_eq!(
            index.checkpoint_dir.as_deref(),
            Some(std::path::Path::new("/ck/index"))
        );
        for stage in stages(&more.topology.config()) {
            let o: kafka::KafkaOptions = (&stage_args(&more, stage)).into();
            // Leased where the state spans the partitions; sign and shard share them.
            assert_eq!(o.leased(), stage.spans_partitions(), "{}", stage.name());
            assert!(!stage_args(&more, stage).scale_out);
        }
    }

    #[test]
    fn a_stage_that_shares_its_partitions_is_ready_without_any() {
        let plan = plan(&run_args(&[]));
        for s in &plan {
            s.health
                .broker_up
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let ready: Vec<_> = plan
            .iter()
            .map(|s| (s.stage.name(), s.health.ready().is_ok()))
            .collect();
        // Until the lease or the partitions come, only the sign stage is.
        assert_eq!(
            ready,
            [("sign", true), ("index", false), ("cluster", false)]
        );
    }
}
