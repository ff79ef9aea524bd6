//! The `neardup` binary's library: Kafka I/O, replay from files, the embedded demo, evaluation.
//!
//! All processing lives in `neardup-topology`; this crate only moves bytes, owns offsets and
//! decides when it is safe to commit them (at-least-once: an input offset is committed only after
//! every output it caused was acknowledged by the broker).

pub mod at_end;
mod buffers;
pub mod checkpoints;
pub mod cli;
pub mod config;
pub mod demo;
pub mod duration;
pub mod eval;
pub mod http;
pub mod kafka;
pub mod kafka_range;
pub mod lease;
pub mod merge;
pub mod replay;
pub mod report;
pub mod sample;
pub mod scale_out;
pub mod sizing;
pub mod summary;
pub mod telemetry;
pub mod throttle;
pub mod topics;
pub mod upstream;
pub mod warc;
mod workers;
