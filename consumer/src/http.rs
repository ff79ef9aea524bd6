//! The HTTP endpoints of `neardup run` (`--http-listen ADDR`):
//!
//! - `GET /clusters?url=URL` — the cluster map (issue 5): the URL's cluster at each level it is
//!   clustered at (`very_similar`, `virtually_identical`), with the cluster's id, size and
//!   canonical URL, as JSON; 404 when the URL is in no cluster, 400 without `url`, 421 from a
//!   split stage that holds no clusters (any but `cluster`). The URL is a query parameter, so
//!   encode it (`curl -G --data-urlencode url=... host:port/clusters`).
//!   An instance standing by for the lease forwards the question to the holder, which publishes
//!   its `--http-advertise` URL to the broker (see [`crate::lease`]), and relays its answer
//!   (header `x-neardup-answered-by`); so a Service in front of every instance answers from
//!   any. Without that URL, or when the holder cannot be reached, a standby answers 503.
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
use std::time::Duration;
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

/// The header a forwarded question carries: its answerer does not forward it again.
const FORWARDED: &str = "x-neardup-forwarded";
/// The header of a forwarded answer: the URL of the instance that answered.
const ANSWERED_BY: &str = "x-neardup-answered-by";
/// How long a forwarded question may take, connection included.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// Where an instance serves HTTP, as `--http-advertise` gives it: `http://HOST[:PORT][/]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `HOST:PORT`, for the connection and the `Host` header.
    authority: String,
}

impl Peer {
    /// Checks `url`; the error says what is wrong with it.
    pub fn parse(url: &str) -> std::result::Result<Peer, String> {
        let Some(rest) = url.strip_prefix("http://") else {
            return Err(format!(
                "{url:?} is not an http:// URL (the endpoints serve plain HTTP): give http://HOST:PORT, the address the other instances reach --http-listen at"
            ));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
            return Err(format!(
                "{url:?} must be http://HOST:PORT, without a path: the other instances add /clusters to it"
            ));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && !authority.ends_with(']') => (h, Some(p)),
            _ => (authority, None),
        };
        if host.is_empty() || port.is_some_and(|p| p.parse::<u16>().is_err()) {
            return Err(format!("{url:?}: not a HOST:PORT after http://"));
        }
        // An IPv6 address as Kubernetes gives a pod's (`http://$(POD_IP):9090`) comes without
        // brackets: then the port is required and the last part.
        let host = if host.contains(':') && !host.starts_with('[') {
            if port.is_none() {
                return Err(format!(
                    "{url:?}: an IPv6 address needs its port (http://ADDRESS:PORT) or brackets (http://[ADDRESS])"
                ));
            }
            format!("[{host}]")
        } else {
            host.to_owned()
        };
        let authority = format!("{host}:{}", port.unwrap_or("80"));
        Ok(Peer { authority })
    }
}

/// How long a standby trusts the holder's URL it read from the broker before reading it again
/// (at once when the holder does not answer): a question does not cost a round trip to the
/// broker, and questions do not wait in line for the broker's client.
const HOLDER_TTL: Duration = Duration::from_secs(2);

/// What a standby needs to forward a `/clusters` question to the lease's holder
/// (`--http-advertise`): where the holder says it serves, and this instance's own URL.
pub struct Forward {
    holder: crate::lease::Holder,
    own: String,
    /// The holder's URL as last read, and when.
    known: std::sync::Mutex<Option<(std::time::Instant, Option<String>)>>,
}

impl Forward {
    /// For `neardup run` with `args`: the lease of the stage that holds the clusters (the
    /// cluster stage in a `--scale-out` process). None when standbys do not forward: no
    /// `--http-advertise`, or no lease (every instance holding clusters then runs).
    pub fn for_run(args: &crate::cli::RunArgs) -> Option<std::sync::Arc<Forward>> {
        let own = args.http_advertise.clone()?;
        let stage_args = if args.scale_out {
            crate::scale_out::stage_args(args, Stage::Cluster)
        } else {
            args.clone()
        };
        let opts = crate::kafka::KafkaOptions::from(&stage_args).for_stage();
        if !(opts.leased() && opts.stage.holds_clusters()) {
            tracing::warn!(
                "--http-advertise is of use with --lease (or --scale-out) only, on a stage that holds the clusters: this instance publishes nothing"
            );
            return None;
        }
        Some(std::sync::Arc::new(Forward {
            holder: crate::lease::Holder::new(&opts),
            own,
            known: std::sync::Mutex::new(None),
        }))
    }

    /// The holder's URL as last read, and when.
    fn known(&self) -> std::sync::MutexGuard<'_, Option<(std::time::Instant, Option<String>)>> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The holder's URL: as read less than [`HOLDER_TTL`] ago, or from the broker.
    async fn holder(self: &std::sync::Arc<Self>) -> Result<Option<String>> {
        if let Some((at, url)) = &*self.known() {
            if at.elapsed() < HOLDER_TTL {
                return Ok(url.clone());
            }
        }
        let me = self.clone();
        let url = tokio::task::spawn_blocking(move || me.holder.url()).await??;
        *self.known() = Some((std::time::Instant::now(), url.clone()));
        Ok(url)
    }

    /// Asks the holder of the lease what `url`'s clusters are, on behalf of this standby: its
    /// answer as it gave it, or 503 with why there is none.
    async fn ask(self: std::sync::Arc<Self>, url: &str) -> Response {
        let outcome = |o: &'static str| {
            metrics::counter!("neardup_clusters_forwarded_total", "outcome" => o).increment(1)
        };
        let holder = match self.holder().await {
            Ok(Some(holder)) if holder != self.own => holder,
            Ok(_) => {
                outcome("no_holder");
                return not_running();
            }
            Err(e) => {
                outcome("no_holder");
                return unavailable(format!(
                    "standing by for the lease, and cannot learn from the broker which instance holds it: {e:#}"
                ));
            }
        };
        let path = format!(
            "/clusters?url={}",
            form_urlencoded::byte_serialize(url.as_bytes()).collect::<String>()
        );
        let asked = match Peer::parse(&holder) {
            Ok(peer) => tokio::time::timeout(FORWARD_TIMEOUT, fetch(&peer, &path))
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer in {FORWARD_TIMEOUT:?}"))),
            Err(e) => Err(anyhow::anyhow!(e)),
        };
        // No answer, or "not running here": the lease may have moved, and the next question
        // reads where it went.
        if asked.as_ref().map_or(true, |(status, _)| {
            *status == StatusCode::SERVICE_UNAVAILABLE
        }) {
            *self.known() = None;
        }
        outcome(if asked.is_ok() {
            "answered"
        } else {
            "unreachable"
        });
        match asked {
            Ok((status, body)) => (
                status,
                [
                    ("content-type", "application/json".to_owned()),
                    (ANSWERED_BY, holder),
                ],
                body,
            )
                .into_response(),
            Err(e) => unavailable(format!(
                "standing by for the lease; its holder published {holder}, which did not answer (it may have just stopped: the lease moves within the session timeout): {e:#}"
            )),
        }
    }
}

/// A GET of `path` from `peer`: the status and the body.
async fn fetch(peer: &Peer, path: &str) -> Result<(StatusCode, axum::body::Bytes)> {
    use http_body_util::BodyExt as _;
    let stream = tokio::net::TcpStream::connect(&peer.authority)
        .await
        .with_context(|| format!("cannot connect to {}", peer.authority))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let request = axum::http::Request::get(path)
        .header("host", &peer.authority)
        .header(FORWARDED, "1")
        .body(http_body_util::Empty::<axum::body::Bytes>::new())?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// The state of the `/clusters` handler.
#[derive(Clone)]
struct Clusters {
    queries: mpsc::Sender<ClusterQuery>,
    stage: Stage,
    forward: Option<std::sync::Arc<Forward>>,
}

/// Serves the endpoints of a process running `stage` (a `--scale-out` process: the cluster
/// stage's) on `listener` until `shutdown` turns true. With `forward`, a standby forwards
/// `/clusters` questions to the lease's holder.
pub fn serve(
    listener: tokio::net::TcpListener,
    stage: Stage,
    queries: mpsc::Sender<ClusterQuery>,
    forward: Option<std::sync::Arc<Forward>>,
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
        .with_state(Clusters {
            queries,
            stage,
            forward,
        });
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
    State(Clusters {
        queries,
        stage,
        forward,
    }): State<Clusters>,
    headers: axum::http::HeaderMap,
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
        // Not running here: a standby forwards the question to the holder, once.
        _ => match forward {
            Some(f) if !headers.contains_key(FORWARDED) => f.ask(&url).await,
            _ => not_running(),
        },
    }
}

fn not_running() -> Response {
    unavailable("the topology is not running here (starting, shutting down, or standing by for the lease: ask the instance holding it, or give every instance --http-advertise, and a standby forwards the question to it)".into())
}

fn unavailable(error: String) -> Response {
    json(
        StatusCode::SERVICE_UNAVAILABLE,
        serde_json::json!({ "error": error }),
    )
}

fn json(status: StatusCode, body: serde_json::Value) -> Response {
    (
        status,
        [("content-type", "application/json")],
        body.to_string() + "\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advertised_url_is_http_host_and_port_without_a_path() {
        let authority = |url: &str| Peer::parse(url).map(|p| p.authority);
        assert_eq!(authority("http://10.0.3.7:9090").unwrap(), "10.0.3.7:9090");
        assert_eq!(authority("http://10.0.3.7:9090/").unwrap(), "10.0.3.7:9090");
        assert_eq!(
            authority("http://neardup-0.neardup:9090").unwrap(),
            "neardup-0.neardup:9090"
        );
        assert_eq!(authority("http://pod.example").unwrap(), "pod.example:80");
        assert_eq!(
            authority("http://[fd00::7]:9090").unwrap(),
            "[fd00::7]:9090"
        );
        assert_eq!(authority("http://[fd00::7]").unwrap(), "[fd00::7]:80");
        assert_eq!(authority("http://fd00::7:9090").unwrap(), "[fd00::7]:9090");
        for (bad, says) in [
            ("https://10.0.3.7:9090", "not an http:// URL"),
            ("10.0.3.7:9090", "not an http:// URL"),
            ("http://", "without a path"),
            ("http://10.0.3.7:9090/clusters", "without a path"),
            ("http://user@10.0.3.7:9090", "without a path"),
            ("http://10.0.3.7:port", "not a HOST:PORT"),
            ("http://10.0.3.7:99999", "not a HOST:PORT"),
            ("http://:9090", "not a HOST:PORT"),
            ("http://fd00::7", "needs its port"),
        ] {
            let e = Peer::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
