//! The preparing threads' queue, shared by `neardup run` and a replay: every thread takes the
//! next job as soon as it is free, so one long page does not hold up the records behind it.

use std::sync::mpsc::Receiver;
use std::sync::Mutex;

/// Hands the jobs of `queue` to `work` one by one until the sender is dropped (or another
/// thread panicked holding the lock). The lock is held only while waiting for the next job.
pub(crate) fn take_jobs<J>(queue: &Mutex<Receiver<J>>, mut work: impl FnMut(J)) {
    loop {
        let next = queue.lock().map(|rx| rx.recv());
        let Ok(Ok(job)) = next else { break };
        work(job);
    }
}
