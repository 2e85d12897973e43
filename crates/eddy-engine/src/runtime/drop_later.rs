//! Freeing a finished operator's state off the job's path.
//!
//! In: a value whose drop is slow and does nothing but free memory (the
//! rows an operator still held when its inputs ended, millions of small
//! allocations). Out: nothing; the value is dropped on one background
//! thread, `eddy-free`, so the job is done when its results are, not
//! after its memory is returned. Freeing the LEFT join benchmark's 4
//! million held rows took about a fifth of its run. A process that exits
//! meanwhile leaves the rest to the OS. Never hand over what releases
//! anything but memory (files, budgets, processes): its release would
//! race the job's end.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Mutex, OnceLock};

type Garbage = Box<dyn Send>;

/// Drops `value` on the background thread (here, when it cannot start).
pub(crate) fn drop_later<T: Send + 'static>(value: T) {
    static FREER: OnceLock<Option<Mutex<Sender<Garbage>>>> = OnceLock::new();
    let freer = FREER.get_or_init(|| {
        let (tx, rx) = channel::<Garbage>();
        std::thread::Builder::new()
            .name("eddy-free".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()
            .map(|_| Mutex::new(tx))
    });
    let garbage: Garbage = Box::new(value);
    let Some(freer) = freer else {
        return drop(garbage);
    };
    let sent = match freer.lock() {
        Ok(tx) => tx.send(garbage),
        Err(poisoned) => poisoned.into_inner().send(garbage),
    };
    // The thread is gone (it cannot panic): drop here.
    if let Err(unsent) = sent {
        drop(unsent.0);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_value_handed_over_is_dropped_soon_after() {
        let dropped = Arc::new(AtomicBool::new(false));
        drop_later(Flag(dropped.clone()));
        let started = Instant::now();
        while !dropped.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(10), "never dropped");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
