//! The `neardup` command: `run` (Kafka), `replay` (files), `demo` (embedded Kafka + sample),
//! `eval` (pair events against a ground truth).

use anyhow::Result;
use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _};
use neardup::cli::{Cli, Command};
use neardup::{config, demo, eval, http, kafka, replay, summary};
use tokio::sync::watch;

/// mimalloc instead of glibc's allocator: pages (25 KB bodies and their JSON) are allocated on
/// the preparing threads and freed on the run loop's, which glibc pays for in locking and
/// consolidation (12 % of the machine's CPU time in a run of the medium stream).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logging(cli.log_json);
    match real_main(cli, &matches) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            say(&mut std::io::stderr(), &format!("neardup: error: {e:#}\n"));
            std::process::ExitCode::FAILURE
        }
    }
}

fn real_main(cli: Cli, matches: &ArgMatches) -> Result<()> {
    let sub = |name: &str| {
        matches
            .subcommand_matches(name)
            .expect("the parsed subcommand")
    };
    match cli.command {
        Command::Replay(mut args) => {
            config::resolve_replay(&mut args, sub("replay"))?;
            let report = match &args.topic {
                Some(topic) => neardup::kafka_range::replay_kafka(
                    &neardup::kafka_range::KafkaRange {
                        brokers: args.brokers.clone().unwrap_or_default(),
                        topic: topic.clone(),
                        from: args.from,
                        to: args.to,
                        kafka: args.kafka.clone(),
                    },
                    &args.out,
                    args.config(),
                    args.topology.sign_cache,
                )?,
                None => replay::replay_files(
                    &args.input,
                    &args.out,
                    args.config(),
                    args.topology.sign_cache,
                    args.revisit_cache,
                )?,
            };
            say(
                &mut std::io::stdout(),
                &format!("{}outputs in {}\n", report.summary, args.out.display()),
            );
            Ok(())
        }
        Command::Run(mut args) => {
            config::resolve_run(&mut args, sub("run"))?;
            if args.check_config {
                let stages = if args.scale_out {
                    neardup::scale_out::stages(&args.topology.config())
                } else {
                    vec![args.stage]
                };
                for stage in stages {
                    if let Some(role) = stage.role() {
                        neardup_topology::Topology::with_role(args.topology.config(), role)
                            .map_err(|e| anyhow::anyhow!("--stage {}: {e}", stage.name()))?;
                    }
                }
                kafka::check_clients(&(&args).into())?;
                say(
                    &mut std::io::stdout(),
                    &config::to_toml(&config::effective(&args)),
                );
                return Ok(());
            }
            run(args)
        }
        Command::Topics(mut args) => {
            config::resolve_run(&mut args.run, sub("topics"))?;
            if args.replication_factor == 0 {
                anyhow::bail!("--replication-factor 0: give 1 or more, or -1 for the brokers' default.replication.factor");
            }
            let opts: kafka::KafkaOptions = (&args.run).into();
            // A scale-out process runs the split stages: it needs their topics.
            let split = args.split || args.run.scale_out;
            if args.run.check_config {
                // Without the broker: the configuration, and the topics it needs.
                kafka::check_clients(&opts)?;
                say(
                    &mut std::io::stdout(),
                    &config::to_toml(&config::effective(&args.run)),
                );
                let needs = neardup::topics::plan(&opts, &args.run.topology.config(), split);
                say(&mut std::io::stdout(), &neardup::topics::describe(&needs));
                return Ok(());
            }
            let req = neardup::topics::TopicsRequest {
                create: args.create,
                split,
                partitions: args.partitions.map(usize::from),
                replication_factor: args.replication_factor,
            };
            let (report, ready) = runtime()?.block_on(neardup::topics::topics(
                &opts,
                &args.run.topology.config(),
                &req,
            ))?;
            say(&mut std::io::stdout(), &report);
            if !ready {
                anyhow::bail!(if args.create {
                    "some topics above cannot work as they are; see their status"
                } else {
                    "some topics above are missing or cannot work as they are: `--create` makes the missing ones"
                });
            }
            Ok(())
        }
        Command::Demo(args) => runtime()?.block_on(demo::demo(&args)),
        Command::Eval(args) => {
            say(&mut std::io::stdout(), &eval::run(&args)?);
            Ok(())
        }
    }
}

fn run(args: neardup::cli::RunArgs) -> Result<()> {
    if args.scale_out {
        return run_scaled(&args);
    }
    runtime()?.block_on(async {
        let (tx, rx) = watch::channel(false);
        stop_on_signal(std::sync::Arc::new(tx));
        // The HTTP endpoints ask the run loop; without --http-listen nobody asks.
        let (queries, asked) = tokio::sync::mpsc::channel(64);
        let health = std::sync::Arc::new(neardup::telemetry::Health::default());
        serve_http(
            &args,
            args.stage,
            &queries,
            neardup::telemetry::Readiness::one(health.clone()),
            &rx,
            "serving HTTP: /clusters, /healthz, /readyz, /metrics",
        )
        .await?;
        let outcome =
            kafka::run(&(&args).into(), args.topology.config(), rx, asked, health).await?;
        say(&mut std::io::stderr(), &summary_of(&outcome));
        Ok(())
    })
}

/// `neardup run --scale-out`: every stage on runtimes of their own (crate::scale_out), the
/// signals and the HTTP endpoints on this one.
fn run_scaled(args: &neardup::cli::RunArgs) -> Result<()> {
    let rt = runtime()?;
    let (tx, rx) = watch::channel(false);
    let tx = std::sync::Arc::new(tx);
    let stages = neardup::scale_out::plan(args);
    let (queries, asked) = tokio::sync::mpsc::channel(64);
    rt.block_on(async {
        stop_on_signal(tx.clone());
        tracing::info!(stages = ?stages.iter().map(|s| s.stage.name()).collect::<Vec<_>>(), "running every stage");
        serve_http(
            args,
            neardup::cli::Stage::Cluster,
            &queries,
            neardup::telemetry::Readiness::of(
                stages.iter().map(|s| (s.stage.name(), s.health.clone())).collect(),
            ),
            &rx,
            "serving HTTP: /clusters (the cluster stage), /healthz, /readyz (every stage), /metrics (labelled by stage)",
        )
        .await
    })?;
    // `queries` lives on with the process: the cluster stage's channel stays open without HTTP.
    let outcomes = neardup::scale_out::run(args, stages, rx, tx, asked)?;
    for (stage, outcome) in outcomes {
        say(
            &mut std::io::stderr(),
            &format!("stage {}:\n{}", stage.name(), summary_of(&outcome)),
        );
    }
    Ok(())
}

/// Turns `stop` true on SIGTERM or SIGINT.
fn stop_on_signal(stop: std::sync::Arc<watch::Sender<bool>>) {
    tokio::spawn(async move {
        wait_for_signal().await;
        let _ = stop.send(true);
    });
}

/// With `--http-listen`, serves the endpoints of a process running `stage` (see
/// [`http::serve`]) until `shutdown` turns true, and logs `what` it serves.
async fn serve_http(
    args: &neardup::cli::RunArgs,
    stage: neardup::cli::Stage,
    queries: &tokio::sync::mpsc::Sender<http::ClusterQuery>,
    readiness: neardup::telemetry::Readiness,
    shutdown: &watch::Receiver<bool>,
    what: &str,
) -> Result<()> {
    let Some(addr) = &args.http_listen else {
        return Ok(());
    };
    let listener = http::bind(addr).await?;
    let metrics = neardup::telemetry::install()?;
    tracing::info!(address = %listener.local_addr()?, "{what}");
    http::serve(
        listener,
        stage,
        queries.clone(),
        http::Forward::for_run(args),
        readiness,
        metrics,
        shutdown.clone(),
    );
    Ok(())
}

/// The summary of a run of one stage: its counts, and what its sign cache did.
fn summary_of(outcome: &kafka::RunOutcome) -> String {
    format!(
        "{}{}",
        summary::render(&outcome.topology, outcome.elapsed),
        summary::sign_cache(&outcome.sign_cache)
    )
}

/// Writes `text`, ignoring a reader that went away (`neardup eval ... | head`): `print!` panics
/// on a closed pipe.
fn say(out: &mut impl std::io::Write, text: &str) {
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NEARDUP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rdkafka=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A closed standard error (a pipe to `head`, a log collector gone) must not stop the
        // process: tracing reports a failed write with `eprint!`, which panics, and inside one of
        // librdkafka's callbacks a panic aborts (`neardup run ... 2>&1 | head -20` did, with 134).
        .log_internal_errors(false)
        // Colours only for a person at a terminal, not in files and log collectors.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}
