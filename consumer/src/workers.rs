//! The preparing threads' queue, shared by `neardup run` and a replay: every thread takes the
//! next job as soon as it is free, so one long page does not hold up the records behind it.

use std::sync::mpsc::Receiver;
use std::sync::Mutex;

/// How many preparing threads `neardup run` and a replay start: one per core and one more.
///
/// The extra thread keeps the cores busy while a preparing thread waits for its next record or
/// hands its result over, and while the thread applying the results (and in a run,
/// librdkafka's threads) sleeps. Against the test broker on this machine's two cores (`neardup
/// run --assign`, the medium crawl, three rounds of the three counts in turn), three threads
/// read the stream in 9.60-9.91 s where two took 10.06-10.28 s, and four 9.68-10.09 s; the
/// replay of the medium crawl took 6.10-6.21 s against 6.29-6.46 s with one per core (three
/// alternations).
pub(crate) fn preparing_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()) + 1
}

/// Hands the jobs of `queue` to `work` one by one until the sender is dropped (or another
/// thread panicked holding the lock). The lock is held only while waiting for the next job.
pub(crate) fn take_jobs<J>(queue: &Mutex<Receiver<J>>, mut work: impl FnMut(J)) {
    loop {
        let next = queue.lock().map(|rx| rx.recv());
        let Ok(Ok(job)) = next else { break };
        work(job);
    }
}
