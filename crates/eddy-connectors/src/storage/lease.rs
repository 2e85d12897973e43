//! A lease in a bucket: one holder at a time for a named thing (a group
//! job's task), among processes that share no disk and whose clocks need
//! not agree.
//!
//! In: a bucket prefix (`s3://lake/state/leases/task-3`), the holder's
//! name and a time to live. Out: a [`Lease`] while this process holds it,
//! renewed on a thread of its own, released when dropped.
//!
//! ```text
//!  leases/task-3/00000000000000000007   {"holder":"host-a/4711","beat":52,"released":false}
//!  leases/task-3/00000000000000000008   created by put-if-absent: the next holder
//! ```
//!
//! Each holding is an epoch: an object created with put-if-absent, so two
//! processes never both create the same epoch. Its holder rewrites it
//! every quarter of the time to live with its beat counted up, and marks
//! it released when it lets go. Another process takes the next epoch when
//! the newest is released, or when it has watched its beat stand still
//! for the whole time to live on its own clock (a dead holder): no clock
//! is compared with another machine's. A holder that has not renewed for
//! half the time to live, or sees a newer epoch, has lost the lease
//! ([`Lease::check`] says so) and must stop before writing anything more:
//! a task checks before each checkpoint's state is uploaded, so a process
//! paused past its lease never commits over its successor.
//!
//! ```no_run
//! use std::time::Duration;
//! use eddy_connectors::storage::{Bucket, LeaseWatch};
//!
//! let bucket = Bucket::open("s3://lake/state/leases/task-3")?;
//! let mut watch = LeaseWatch::default();
//! if let Some(lease) = watch.try_acquire(&bucket, "host-a/4711", Duration::from_secs(10))? {
//!     lease.check().expect("held");
//!     // ... run the task; the lease is released when `lease` is dropped.
//! }
//! # Ok::<(), eddy_connectors::ConnectorError>(())
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Bucket;
use crate::error::{ConnectorError, Result};

/// What an epoch's object holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Holding {
    holder: String,
    beat: u64,
    released: bool,
}

/// The name of epoch `epoch`'s object: zero-padded, so names sort as
/// numbers.
fn epoch_name(epoch: u64) -> String {
    format!("{epoch:020}")
}

/// A prospective holder's memory of the newest epoch it has seen: which,
/// at which beat, and since when (its own clock) the beat stood still.
#[derive(Debug, Default)]
pub struct LeaseWatch {
    seen: Option<(u64, u64, Instant)>,
}

impl LeaseWatch {
    /// Takes the lease under `bucket` for `holder` if it is free: never
    /// held, released, or its holder silent for `ttl` as watched by this
    /// process (calls before that return `None`, and start the watch).
    /// `None` as well when another process took it first.
    pub fn try_acquire(
        &mut self,
        bucket: &Bucket,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>> {
        let newest = bucket
            .list()?
            .into_iter()
            .filter_map(|o| o.name.parse::<u64>().ok())
            .max();
        let next = match newest {
            None => 1,
            Some(epoch) => {
                let Some(bytes) = bucket.get(&epoch_name(epoch))? else {
                    return Ok(None); // replaced while listed: look again
                };
                let holding: Holding =
                    serde_json::from_slice(&bytes).map_err(|e| ConnectorError::Group {
                        group: bucket.to_string(),
                        message: format!("lease epoch {epoch} is unreadable: {e}"),
                    })?;
                if !holding.released {
                    let now = Instant::now();
                    match self.seen {
                        Some((e, beat, since)) if e == epoch && beat == holding.beat => {
                            if now.duration_since(since) < ttl {
                                return Ok(None);
                            }
                            tracing::warn!(
                                "{bucket}: its holder {} has not renewed it for {ttl:?}; taking it over",
                                holding.holder
                            );
                        }
                        _ => {
                            self.seen = Some((epoch, holding.beat, now));
                            return Ok(None);
                        }
                    }
                }
                epoch + 1
            }
        };
        let holding = Holding {
            holder: holder.to_string(),
            beat: 0,
            released: false,
        };
        if !bucket.put_if_absent(&epoch_name(next), encode(&holding))? {
            return Ok(None);
        }
        self.seen = None;
        // Epochs before the previous one are of no use to anyone.
        if let Some(epoch) = newest {
            for old in bucket
                .list()?
                .into_iter()
                .filter_map(|o| o.name.parse::<u64>().ok())
            {
                if old < epoch {
                    let _ = bucket.delete(&epoch_name(old));
                }
            }
        }
        Ok(Some(Lease::start(bucket.clone(), next, holding, ttl)))
    }
}

/// This process, as a lease names its holder: the host and process id.
pub fn this_process() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "eddy".into());
    format!("{host}/{}", std::process::id())
}

fn encode(holding: &Holding) -> Vec<u8> {
    serde_json::to_vec(holding).unwrap_or_default()
}

/// What the renewing thread and the holder share.
#[derive(Debug)]
struct Renewal {
    /// Set when the lease is let go: the thread ends.
    done: Mutex<bool>,
    wake: Condvar,
    last_renewed: Mutex<Instant>,
    superseded: AtomicBool,
}

/// A lease held by this process (see the module docs); released when
/// dropped.
#[derive(Debug)]
pub struct Lease {
    bucket: Bucket,
    epoch: u64,
    holding: Holding,
    ttl: Duration,
    renewal: Arc<Renewal>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    fn start(bucket: Bucket, epoch: u64, holding: Holding, ttl: Duration) -> Self {
        let renewal = Arc::new(Renewal {
            done: Mutex::new(false),
            wake: Condvar::new(),
            last_renewed: Mutex::new(Instant::now()),
            superseded: AtomicBool::new(false),
        });
        let thread = {
            let (bucket, mut holding, renewal) = (bucket.clone(), holding.clone(), renewal.clone());
            std::thread::Builder::new()
                .name("eddy-lease".into())
                .spawn(move || renew(&bucket, epoch, &mut holding, ttl, &renewal))
                .ok()
        };
        Self {
            bucket,
            epoch,
            holding,
            ttl,
            renewal,
            thread,
        }
    }

    /// Its epoch (counts up with every new holder).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Its holder's name, as given.
    pub fn holder(&self) -> &str {
        &self.holding.holder
    }

    /// `Ok` while this process still holds the lease: no newer epoch in
    /// the bucket (asked now) and renewed within half the time to live.
    /// The reason otherwise.
    pub fn check(&self) -> std::result::Result<(), LeaseLost> {
        if let Some(lost) = self.lost() {
            return Err(lost);
        }
        match self.bucket.exists(&epoch_name(self.epoch + 1)) {
            Ok(false) => Ok(()),
            Ok(true) => {
                self.renewal.superseded.store(true, Ordering::SeqCst);
                Err(self.superseded())
            }
            Err(error) => Err(LeaseLost::Unknown {
                bucket: self.bucket.to_string(),
                error: Box::new(error),
            }),
        }
    }

    /// Why the lease was lost, as the renewing thread found it (asks the
    /// bucket nothing).
    pub fn lost(&self) -> Option<LeaseLost> {
        if self.renewal.superseded.load(Ordering::SeqCst) {
            return Some(self.superseded());
        }
        let silent = self
            .renewal
            .last_renewed
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or_default();
        (silent > self.ttl / 2).then(|| LeaseLost::Silent {
            bucket: self.bucket.to_string(),
            silent,
            ttl: self.ttl,
        })
    }

    fn superseded(&self) -> LeaseLost {
        LeaseLost::Superseded {
            bucket: self.bucket.to_string(),
            epoch: self.epoch + 1,
        }
    }
}

/// Why a process no longer holds (or cannot tell that it holds) a lease.
#[derive(Debug, thiserror::Error)]
pub enum LeaseLost {
    /// Another process took it: a newer epoch is in the bucket.
    #[error("{bucket}: taken over by another process (epoch {epoch})")]
    Superseded { bucket: String, epoch: u64 },
    /// Not renewed within half its time to live.
    #[error("{bucket}: not renewed for {silent:?} (its time to live is {ttl:?}); another process may hold it now")]
    Silent {
        bucket: String,
        silent: Duration,
        ttl: Duration,
    },
    /// The bucket could not be asked.
    #[error("{bucket}: cannot tell whether it is still held: {error}")]
    Unknown {
        bucket: String,
        error: Box<ConnectorError>,
    },
}

/// The renewing thread: rewrites the epoch's object every quarter of the
/// time to live until the lease is let go or found taken over.
fn renew(bucket: &Bucket, epoch: u64, holding: &mut Holding, ttl: Duration, renewal: &Renewal) {
    let every = ttl / 4;
    loop {
        {
            let Ok(done) = renewal.done.lock() else {
                return;
            };
            let Ok((done, _)) = renewal.wake.wait_timeout_while(done, every, |done| !*done) else {
                return;
            };
            if *done {
                return;
            }
        }
        match bucket.exists(&epoch_name(epoch + 1)) {
            Ok(true) => {
                renewal.superseded.store(true, Ordering::SeqCst);
                tracing::warn!(
                    "{bucket}: taken over by another process (epoch {})",
                    epoch + 1
                );
                return;
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!("{bucket}: cannot renew the lease: {e}");
                continue;
            }
        }
        holding.beat += 1;
        match bucket.put(&epoch_name(epoch), encode(holding)) {
            Ok(()) => {
                if let Ok(mut last) = renewal.last_renewed.lock() {
                    *last = Instant::now();
                }
            }
            // Lost once it stays unrenewed for half the time to live.
            Err(e) => tracing::warn!("{bucket}: cannot renew the lease: {e}"),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(mut done) = self.renewal.done.lock() {
            *done = true;
        }
        self.renewal.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        if self.lost().is_none() {
            let released = Holding {
                released: true,
                ..self.holding.clone()
            };
            if let Err(e) = self.bucket.put(&epoch_name(self.epoch), encode(&released)) {
                tracing::warn!(
                    "{}: cannot release the lease (it expires instead): {e}",
                    self.bucket
                );
            }
        }
    }
}
