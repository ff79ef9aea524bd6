//! Repeated Kafka client errors, logged once per period.
//!
//! While no broker answers, librdkafka reports the same errors over and over: `neardup run`
//! against a closed port wrote 3,711 log lines in 90 seconds (each consumer poll's error and
//! each `AllBrokersDown` of both clients, about 40 a second), which buries the one line that says
//! what is wrong, and a long outage fills a log store with them. Now the first error of a kind is
//! logged at once, its repeats within [`PERIOD`] are only counted, and the next one logged after
//! the period says how many were left out. Every occurrence, logged or not, is counted in
//! `neardup_kafka_errors_total{client, code}`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the repeats of one kind of error stay out of the log.
pub const PERIOD: Duration = Duration::from_secs(30);

/// Keeps, per kind of error, when it was last logged and how many repeats were left out since.
#[derive(Debug)]
pub struct Throttle {
    period: Duration,
    seen: Mutex<HashMap<String, Seen>>,
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    logged_at: Instant,
    left_out: u64,
}

/// More kinds than this are not expected (they are error codes); past it the table starts over,
/// so it cannot grow without bound.
const MAX_KINDS: usize = 256;

impl Throttle {
    /// A throttle that logs each kind at most once per `period`.
    pub fn new(period: Duration) -> Throttle {
        Throttle {
            period,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Whether an error of `kind` occurring at `now` is to be logged: `Some(n)`, with the `n`
    /// repeats left out since it was last logged, or `None` (a repeat within the period).
    pub fn admit(&self, kind: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = seen.get_mut(kind) {
            if now.saturating_duration_since(s.logged_at) < self.period {
                s.left_out += 1;
                return None;
            }
            let left_out = s.left_out;
            *s = Seen {
                logged_at: now,
                left_out: 0,
            };
            return Some(left_out);
        }
        if seen.len() >= MAX_KINDS {
            seen.clear();
        }
        seen.insert(
            kind.to_string(),
            Seen {
                logged_at: now,
                left_out: 0,
            },
        );
        Some(0)
    }
}

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle::new(PERIOD)
    }
}

/// The label of an error in `neardup_kafka_errors_total`: its librdkafka code (a bounded set),
/// or `other`.
pub fn code_label(error: &rdkafka::error::KafkaError) -> String {
    error
        .rdkafka_error_code()
        .map_or_else(|| "other".to_string(), |c| format!("{c:?}"))
}

/// Counts a Kafka client error and logs it unless it repeats one logged within the period.
/// `client` names the client (`consumer`, `producer`); the message says what to check when no
/// broker answers or a topic is missing.
pub fn kafka_error(
    throttle: &Throttle,
    client: &'static str,
    error: &rdkafka::error::KafkaError,
    reason: &str,
) {
    let code = code_label(error);
    metrics::counter!("neardup_kafka_errors_total", "client" => client, "code" => code.clone())
        .increment(1);
    let kind = format!("{client}: {error}");
    let Some(left_out) = throttle.admit(&kind, Instant::now()) else {
        return;
    };
    let left_out = if left_out > 0 {
        format!(
            " ({left_out} more like it in the last {} s not logged)",
            throttle.period.as_secs()
        )
    } else {
        String::new()
    };
    tracing::warn!(
        client,
        error = %error,
        reason,
        "{}{left_out}",
        hint(error).unwrap_or("Kafka client error, retried by librdkafka"),
    );
}

/// The context of a client whose errors only need to be counted and logged once per period
/// (the Kafka range a replay reads; librdkafka's default context logs every one).
pub struct Logged {
    client: &'static str,
    throttle: Throttle,
}

impl Logged {
    /// A context for the client named `client` in logs and metrics.
    pub fn new(client: &'static str) -> Logged {
        Logged {
            client,
            throttle: Throttle::default(),
        }
    }
}

impl rdkafka::ClientContext for Logged {
    /// Not parsed, nor logged at `info` as the default does (`-X statistics.interval.ms`
    /// reaches this client too).
    fn stats_raw(&self, _statistics: &[u8]) {}

    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        kafka_error(&self.throttle, self.client, &error, reason);
    }
}

impl rdkafka::consumer::ConsumerContext for Logged {}

/// What to check when no broker answers, or a topic is missing.
fn hint(error: &rdkafka::error::KafkaError) -> Option<&'static str> {
    use rdkafka::types::RDKafkaErrorCode as C;
    match error.rdkafka_error_code() {
        Some(C::AllBrokersDown | C::BrokerTransportFailure | C::Resolve) => Some(
            "no broker answers, retrying: check --brokers (NEARDUP_BROKERS), the network, and \
             the kafka properties security.protocol and ssl.*",
        ),
        Some(C::UnknownTopicOrPartition | C::UnknownTopic) => Some(
            "a topic does not exist (yet), retrying: check its name (--input-topic, --topic), \
             or create it (`neardup topics --create` lists and makes the ones neardup writes)",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_a_kind_is_logged_and_its_repeats_are_counted_until_the_period_ends() {
        let t = Throttle::new(Duration::from_secs(30));
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(t.admit("a", at(0)), Some(0));
        for ms in (50..30_000).step_by(50) {
            assert_eq!(t.admit("a", at(ms)), None, "at {ms} ms");
        }
        // Another kind is not held back by the first.
        assert_eq!(t.admit("b", at(10)), Some(0));
        // The period is over: logged, with the 599 repeats left out.
        assert_eq!(t.admit("a", at(30_000)), Some(599));
        assert_eq!(t.admit("a", at(30_001)), None);
        assert_eq!(t.admit("a", at(60_000)), Some(1));
        // A kind that stopped for longer than a period is logged at once when it comes back.
        assert_eq!(t.admit("b", at(200_000)), Some(0));
    }

    #[test]
    fn the_table_of_kinds_is_bounded() {
        let t = Throttle::new(Duration::from_secs(30));
        let now = Instant::now();
        for i in 0..10 * MAX_KINDS {
            assert_eq!(t.admit(&format!("kind {i}"), now), Some(0));
            assert!(t.seen.lock().unwrap().len() <= MAX_KINDS);
        }
    }

    #[test]
    fn errors_are_labelled_by_their_code() {
        use rdkafka::error::KafkaError;
        use rdkafka::types::RDKafkaErrorCode;
        assert_eq!(
            code_label(&KafkaError::Global(RDKafkaErrorCode::AllBrokersDown)),
            "AllBrokersDown"
        );
        assert_eq!(code_label(&KafkaError::Canceled), "other");
        assert!(hint(&KafkaError::Global(RDKafkaErrorCode::AllBrokersDown))
            .is_some_and(|h| h.contains("--brokers")));
        assert!(hint(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::UnknownTopicOrPartition
        ))
        .is_some_and(|h| h.contains("--input-topic")));
        assert_eq!(
            hint(&KafkaError::MessageConsumption(
                RDKafkaErrorCode::OffsetOutOfRange
            )),
            None
        );
    }
}
