//! One active instance per consumer group of a stage whose state spans every partition of its
//! input (`--lease`): the all-in-one, index, verify, cluster and mirror stages.
//!
//! Such a stage cannot share its input's partitions between instances: each would hold only the
//! pages of its own partitions, and miss the pairs, clusters and host pairs joining them to the
//! others' (see [`crate::telemetry::Input`]). With `--lease`, an instance first joins a second
//! consumer group, GROUP + `.lease`, on a topic of one partition (PREFIX + `internal.lease`).
//! Kafka's group protocol gives that partition to exactly one member: the lease. (Only holders
//! write the topic: with `--http-advertise`, a small record with the URL of the holder's HTTP
//! endpoints, keyed by the lease's group, so that a standby can forward `/clusters` questions to
//! it; see [`Holder`].) Its holder subscribes to the stage's input and runs the stage; every other
//! instance stands by, in neither group's assignment of the input, until the lease comes to it:
//! when the holder stops (it leaves the input's group first, having drained, committed and
//! checkpointed, then the lease's group) or dies (its session times out in both groups).
//!
//! The lease's group assigns with `cooperative-sticky`, so an instance joining does not take the
//! lease from its holder (the range assignor would give it to whichever member id sorts first,
//! and every instance joining would move the stage). A holder that loses the lease while running
//! (its session expired: a stall, or the broker out of reach longer than `session.timeout.ms`),
//! or whose input's group drops it, stops: drained, committed where the group still allows it,
//! checkpointed, exit 1. Rejoining in place would be worse: its input's consumer would rejoin
//! the group beside the new holder and share the partitions until the loss is noticed, and a
//! member the group dropped can wait there for minutes (tansu kept one from the lease for over
//! 90 s). Restarted (by Kubernetes, or a supervisor), it stands by or takes the lease.
//!
//! Why a group and not a lock elsewhere: the broker is the one service every instance already
//! reaches, its group coordinator already fences members by session, and the lease's holder is
//! visible with the usual tools (`kafka-consumer-groups --describe --group GROUP.lease`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer as _, ProducerContext};
use tokio::sync::watch;

use crate::kafka::KafkaOptions;
use crate::throttle::{self, Throttle};

/// Whether the lease is held, and how many times it was taken by this instance: a holder whose
/// lease lapsed and came back at once (its thread saw the loss and the new assignment between
/// two looks of the run loop) must still stop, as another instance may have run the stage in
/// between.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Term {
    /// The lease is held now.
    pub held: bool,
    /// The times it was taken since this instance joined the lease's group.
    pub taken: u64,
}

/// Membership of the lease's group, kept by a thread of its own (a member must poll to stay in
/// its group); [`Lease::changed`] says when the lease comes or goes.
pub struct Lease {
    held: watch::Receiver<Term>,
    stop: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
}

impl Lease {
    /// Joins the lease's group of `opts` (a stage's options: GROUP + `.lease` on
    /// [`KafkaOptions::lease_topic`]). The lease is not held yet: wait for [`Lease::changed`].
    pub fn join(opts: &KafkaOptions) -> Result<Lease> {
        let group = opts.lease_group();
        let topic = opts.lease_topic();
        let mut config = opts.client_config(&[
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "latest"),
            ("partition.assignment.strategy", "cooperative-sticky"),
            ("session.timeout.ms", "10000"),
            ("heartbeat.interval.ms", "1000"),
        ]);
        // The stage's clients report the statistics; this one would only log them.
        config.set("statistics.interval.ms", "0");
        let consumer: BaseConsumer = config.create().context(
            "cannot create the lease's Kafka consumer (check --brokers and -X properties)",
        )?;
        consumer
            .subscribe(&[&topic])
            .with_context(|| format!("cannot subscribe to the lease topic {topic}"))?;
        let (tx, held) = watch::channel(Term::default());
        // Only the clusters are asked for on HTTP (crate::http::Forward).
        let mut publisher = opts
            .advertise
            .as_ref()
            .filter(|_| opts.stage.holds_clusters())
            .map(|url| Publisher::new(opts, url))
            .transpose()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = mpsc::channel();
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("neardup-lease".into())
            .spawn(crate::telemetry::staged(move || {
                let throttle = Throttle::default();
                while !stopping.load(Ordering::Relaxed) {
                    // A poll serves the group's callbacks; a record of the topic (a holder's
                    // URL) is ignored.
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(200)) {
                        throttle::kafka_error(&throttle, "consumer", &e, "keeping the lease");
                    }
                    let now = consumer.assignment().is_ok_and(|a| a.count() > 0);
                    if let Some(p) = &mut publisher {
                        p.tick(now);
                    }
                    tx.send_if_modified(|t| {
                        if t.held == now {
                            return false;
                        }
                        t.held = now;
                        t.taken += u64::from(now);
                        tracing::info!(
                            held = now,
                            term = t.taken,
                            "the lease's group assigned its partition {}",
                            if now {
                                "to this instance"
                            } else {
                                "away from this instance"
                            }
                        );
                        true
                    });
                }
                // Leaving the group hands the lease on at once (not at the session's timeout).
                drop(consumer);
                let _ = done_tx.send(());
            }))
            .context("cannot start the lease's thread")?;
        tracing::info!(%group, %topic, "joined the lease's group: this instance runs the stage while it holds the lease, and stands by otherwise");
        Ok(Lease { held, stop, done })
    }

    /// The lease's state now.
    pub fn term(&self) -> Term {
        *self.held.borrow()
    }

    /// Waits until the lease is taken or lost; returns its state then.
    pub async fn changed(&mut self) -> Term {
        if self.held.changed().await.is_err() {
            // The thread stopped (only on release): nothing will change any more.
            std::future::pending::<()>().await;
        }
        self.term()
    }

    /// Leaves the lease's group (call it after the stage's consumer left its own group, so
    /// that the next holder finds the input's partitions free), waiting at most `limit`; false
    /// when that was not enough (the group's coordinator then notices at the session timeout).
    pub fn release(self, limit: Duration) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        self.done.recv_timeout(limit).is_ok()
    }
}

/// How often the holder publishes its URL again while it holds the lease (a record the topic's
/// retention may delete).
const REPUBLISH: Duration = Duration::from_secs(600);
/// How soon it tries again when a publication failed.
const RETRY: Duration = Duration::from_secs(5);
/// How many of the lease topic's last records a reader looks through for the holder's URL
/// (holders of other groups sharing the topic publish there too).
const SPAN: i64 = 256;

/// The holder's publication of its URL (`--http-advertise`): a record of the lease topic keyed by
/// the lease's group, written when this instance takes the lease and every [`REPUBLISH`] while it
/// holds it. (The commit metadata of the lease's group would say the same without a record, but
/// tansu, the test broker, keeps none, so it could not be tested here.)
struct Publisher {
    producer: BaseProducer<Delivered>,
    topic: String,
    key: String,
    url: String,
    /// A record sent whose delivery is not yet known.
    pending: bool,
    /// When the next is due (now, when the lease is taken).
    next: Instant,
}

/// Where a [`Publisher`]'s delivery outcome arrives.
#[derive(Default)]
struct Delivered(std::sync::Mutex<Option<std::result::Result<(), String>>>);

impl rdkafka::ClientContext for Delivered {}

impl ProducerContext for Delivered {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(result.as_ref().map(|_| ()).map_err(|(e, _)| e.to_string()));
    }
}

impl Publisher {
    fn new(opts: &KafkaOptions, url: &str) -> Result<Publisher> {
        let mut config = opts.client_config(&[("message.timeout.ms", "10000"), ("linger.ms", "0")]);
        // The stage's clients report the statistics; this one would only log them.
        config.set("statistics.interval.ms", "0");
        let producer = config
            .create_with_context(Delivered::default())
            .context("cannot create the producer that publishes this instance's URL as the lease holder's (check --brokers and -X properties)")?;
        Ok(Publisher {
            producer,
            topic: opts.lease_topic(),
            key: opts.lease_group(),
            url: url.to_owned(),
            pending: false,
            next: Instant::now(),
        })
    }

    /// One look of the lease's thread, `held` saying whether this instance holds the lease.
    fn tick(&mut self, held: bool) {
        let now = Instant::now();
        self.producer.poll(Duration::ZERO);
        let outcome = self
            .producer
            .context()
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(outcome) = outcome {
            self.pending = false;
            self.next = now
                + match outcome {
                    Ok(()) => {
                        tracing::info!(url = %self.url, topic = %self.topic, "published this instance's URL as the lease holder's: a standby forwards /clusters questions to it");
                        REPUBLISH
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, url = %self.url, "cannot publish this instance's URL as the lease holder's: a standby asked for /clusters answers 503 until it is; trying again");
                        RETRY
                    }
                };
        }
        if !held {
            self.next = now;
            return;
        }
        if self.pending || now < self.next {
            return;
        }
        let record = BaseRecord::to(&self.topic)
            .key(&self.key)
            .partition(0)
            .payload(&self.url);
        match self.producer.send(record) {
            Ok(()) => self.pending = true,
            Err((e, _)) => {
                tracing::warn!(error = %e, "cannot publish this instance's URL as the lease holder's; trying again");
                self.next = now + RETRY;
            }
        }
    }
}

/// Where the holder of a stage's lease serves HTTP, as it published it (see `Publisher`), read
/// by a client that joins no group.
pub struct Holder {
    prober: std::sync::Mutex<crate::at_end::Prober>,
    group: String,
    topic: String,
}

impl Holder {
    /// For the lease of the stage of `opts` (a stage's options, as [`Lease::join`] takes).
    pub fn new(opts: &KafkaOptions) -> Holder {
        Holder {
            prober: std::sync::Mutex::new(crate::at_end::Prober::new(opts)),
            group: opts.lease_group(),
            topic: opts.lease_topic(),
        }
    }

    /// The URL the last holder published (none: none did lately). Blocks for a few round trips
    /// to the broker.
    pub fn url(&self) -> Result<Option<String>> {
        let value = self
            .prober
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .last_keyed(&self.topic, 0, self.group.as_bytes(), SPAN)?;
        Ok(value.map(|v| String::from_utf8_lossy(&v).into_owned()))
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
