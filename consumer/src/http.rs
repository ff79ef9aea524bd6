//! The HTTP endpoints of `neardup run` (`--http-listen ADDR`):
//!
//! - `GET /clusters?url=URL` — the cluster map (issue 5): the URL's cluster at each level it is
//!   clustered at (`very_similar`, `virtually_identical`), with the cluster's id, size and
//!   canonical URL, as JSON; 404 when the URL is in no cluster, 400 without `url`, 421 from a
//!   split stage that holds no clusters (any but `cluster`). The URL is a query parameter, so
//!   encode it (`curl -G --data-urlencode url=... host:port/clusters`).
//! - `GET /healthz` — 200 while the process serves (liveness).
//! - `GET /readyz` — 200 when partitions are assigned (or, with `--lease`, when standing by for
//!   the lease), their state is restored and a broker is reachable; else 503 with what is
//!   missing (readiness). A process running every stage (`--scale-out`) is ready when each
//!   stage is, and says which stage misses what.
//! - `GET /metrics` — Prometheus text format (see [`crate::telemetry`]).
//!
//! The topology has one owner, the run loop: a query travels to it over a channel and is
//! answered between two input records, so serving never locks or copies the state, and an
//! answer reflects every record processed before it.

use crate::cli::Stage;
use crate::telemetry::Readiness;
use anyhow::{Context as _, Result};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use neardup_schemas::PairLevel;
use neardup_topology::Topology;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot, watch};

/// A question for the run loop: the clusters of `url`.
#[derive(Debug)]
pub struct ClusterQuery {
    /// The URL asked about.
    pub url: String,
    /// Where the answer goes: the JSON body, or `None` when the URL is in no cluster.
    pub reply: oneshot::Sender<Option<serde_json::Value>>,
}

/// The answer to a [`ClusterQuery`] from the topology's current state.
pub fn answer(topo: &Topology, url: &str) -> Option<serde_json::Value> {
    let mut body = serde_json::json!({ "url": url });
    let mut found = false;
    for level in [PairLevel::VerySimilar, PairLevel::VirtuallyIdentical] {
        let info = topo.clusters(level).and_then(|c| c.cluster_of(url));
        body[level.as_str()] = match info {
            Some(i) => {
                found = true;
                serde_json::json!({ "cluster_id": i.id, "size": i.size, "canonical": i.canonical })
            }
            None => serde_json::Value::Null,
        };
    }
    found.then_some(body)
}

/// Binds the listen address, with an error that says what to change.
pub async fn bind(addr: &str) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr} for HTTP (is the port in use? choose another with --http-listen)")
    })
}

/// Serves the endpoints of a process running `stage` (a `--scale-out` process: the cluster
/// stage's) on `listener` until `shutdown` turns true.
pub fn serve(
    listener: tokio::net::TcpListener,
    stage: Stage,
    queries: mpsc::Sender<ClusterQuery>,
    health: Readiness,
    metrics: PrometheusHandle,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/readyz",
            get(move || async move {
                match health.ready() {
                    Ok(()) => (StatusCode::OK, "ready\n".to_owned()),
                    Err(missing) => (
                        StatusCode::SERVICE_UNAVAILABLE,
                        format!("not ready: {}\n", missing.join(", ")),
                    ),
                }
            }),
        )
        .route(
            "/metrics",
            get(move || async move {
                (
                    [("content-type", "text/plain; version=0.0.4")],
                    metrics.render(),
                )
            }),
        )
        .route("/clusters", get(clusters))
        .with_state((queries, stage));
    tokio::spawn(async move {
        let stop = async move {
            while !*shutdown.borrow() {
                if shutdown.changed().await.is_err() {
                    break;
                }
            }
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::warn!(error = %e, "the HTTP server stopped");
        }
    })
}

#[derive(Deserialize)]
struct UrlParam {
    url: Option<String>,
}

async fn clusters(
    State((queries, stage)): State<(mpsc::Sender<ClusterQuery>, Stage)>,
    Query(p): Query<UrlParam>,
) -> Response {
    if !stage.holds_clusters() {
        // Behind a Service that spans every stage, a query may reach a pod of another stage:
        // "not in any cluster" would be wrong.
        return json(
            StatusCode::MISDIRECTED_REQUEST,
            serde_json::json!({"error": format!("this process runs --stage {}, which holds no clusters: ask the cluster stage (--stage cluster) or an all-in-one process", stage.name())}),
        );
    }
    let Some(url) = p.url.filter(|u| !u.is_empty()) else {
        return json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({"error": "give the URL as a query parameter: /clusters?url=<percent-encoded URL>"}),
        );
    };
    let (reply, answer) = oneshot::channel();
    let asked = queries
        .send(ClusterQuery {
            url: url.clone(),
            reply,
        })
        .await;
    match (asked, answer.await) {
        (Ok(()), Ok(Some(body))) => json(StatusCode::OK, body),
        (Ok(()), Ok(None)) => json(
            StatusCode::NOT_FOUND,
            serde_json::json!({"url": url, "error": "not in any cluster"}),
        ),
        _ => json(
            StatusCode::SERVICE_UNAVAILABLE,
            serde_json::json!({"error": "the topology is not running here (starting, shutting down, or standing by for the lease: ask the instance holding it)"}),
        ),
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        body.to_string() + "\n",
    )
        .into_response()
}
