//! Text sinks encode in parallel: a pool of encoding threads shared by
//! every text sink of the process, feeding each sink's ordered writer.
//!
//! In: a sink's batches, in order, and how to turn one into bytes. Out: the
//! bytes of every batch handed to the sink's [`LineOutput`], in the order
//! the batches came, each as soon as it and every batch before it are
//! encoded (so a live feed's rows do not wait for the next batch).
//!
//! ```text
//!   write(b1) write(b2) write(b3)            the sink's task: submit, return
//!       │         │         │
//!   [encoder] [encoder] [encoder]             the process's encoding threads
//!       └─────────┴─────────┴──> output       written in order, by whichever
//!                                             thread finishes the next in turn
//! ```
//!
//! Encoding a batch as JSON is most of what writing it costs; off the
//! sink's task it runs beside the operators that feed the sink, and on
//! several cores at once. A small batch with nothing ahead of it is encoded
//! on the sink's own task: handing it over would cost more than encoding
//! it. At most [`IN_FLIGHT`] batches of a sink wait to be encoded or
//! written; a sink with that many waits for the oldest (back pressure).
//! [`OrderedEncoder::drain`] waits until everything submitted is written:
//! sinks drain before they flush, pre-commit or finish, so checkpoints and
//! the end of a job see every row.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use datafusion::arrow::array::Int64Array;
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::sinks::encoding::{LineOutput, OrderedEncoder};
//!
//! struct Collect(Arc<Mutex<Vec<u8>>>);
//! impl LineOutput for Collect {
//!     fn write_bytes(&mut self, bytes: &[u8]) -> eddy_connectors::error::Result<()> {
//!         self.0.lock().unwrap().extend_from_slice(bytes);
//!         Ok(())
//!     }
//! }
//!
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let mut encoder = OrderedEncoder::new(
//!     Collect(seen.clone()),
//!     Arc::new(|batch: &RecordBatch, out: &mut Vec<u8>| {
//!         eddy_connectors::json_lines::encode_json_lines(batch, out)
//!     }),
//! );
//! let n = Arc::new(Int64Array::from(vec![1, 2])) as _;
//! encoder.write(RecordBatch::try_from_iter([("n", n)]).unwrap()).unwrap();
//! encoder.drain().unwrap();
//! assert_eq!(&*seen.lock().unwrap(), b"{\"n\":1}\n{\"n\":2}\n");
//! ```

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{ConnectorError, Result};

/// Batches of one sink encoded or written at most at once.
pub const IN_FLIGHT: u64 = 8;

/// A batch of fewer rows, with nothing of its sink in flight, is encoded
/// on the sink's task.
pub const INLINE_ROWS: usize = 256;

/// Where a sink's encoded bytes go.
pub trait LineOutput: Send + 'static {
    /// Writes the bytes of one batch.
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<()>;
}

/// How a sink turns a batch into bytes.
pub type Encode = Arc<dyn Fn(&RecordBatch, &mut Vec<u8>) -> Result<()> + Send + Sync>;

type Job = Box<dyn FnOnce() + Send>;

/// The process's encoding threads: one per core, started on first use.
fn pool() -> &'static Sender<Job> {
    static POOL: OnceLock<Sender<Job>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (jobs, queue) = channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for i in 0..threads {
            let queue: Arc<Mutex<Receiver<Job>>> = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("eddy-encode-{i}"))
                .spawn(move || loop {
                    let job = match queue.lock() {
                        Ok(queue) => queue.recv(),
                        Err(_) => return,
                    };
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            // Without threads every batch is encoded on its sink's task.
            if spawned.is_err() {
                break;
            }
        }
        jobs
    })
}

struct State<O> {
    output: O,
    /// Sequence number of the next batch to write.
    next_to_write: u64,
    /// Encoded batches waiting for those before them.
    done: BTreeMap<u64, Result<Vec<u8>>>,
    /// The first failure, reported by the sink's next call.
    failed: Option<ConnectorError>,
    /// Whether a batch failed: nothing after it is written.
    broken: bool,
    /// Buffers to encode into again.
    spare: Vec<Vec<u8>>,
}

struct Shared<O> {
    state: Mutex<State<O>>,
    written: Condvar,
}

impl<O: LineOutput> Shared<O> {
    fn lock(&self) -> MutexGuard<'_, State<O>> {
        // A panic while holding the lock left the output as it was; the
        // failed encoding is already recorded.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records batch `seq`'s bytes and writes every batch now in turn.
    fn finished(&self, seq: u64, encoded: Result<Vec<u8>>) {
        let mut state = self.lock();
        state.done.insert(seq, encoded);
        loop {
            let next = state.next_to_write;
            let Some(encoded) = state.done.remove(&next) else {
                break;
            };
            state.next_to_write += 1;
            match encoded {
                Ok(mut bytes) => {
                    if !state.broken {
                        if let Err(e) = state.output.write_bytes(&bytes) {
                            state.failed = Some(e);
                            state.broken = true;
                        }
                    }
                    bytes.clear();
                    if state.spare.len() < IN_FLIGHT as usize {
                        state.spare.push(bytes);
                    }
                }
                Err(e) => {
                    if !state.broken {
                        state.failed = Some(e);
                        state.broken = true;
                    }
                }
            }
        }
        drop(state);
        self.written.notify_all();
    }
}

/// One sink's batches, encoded on the pool and written in order.
pub struct OrderedEncoder<O: LineOutput> {
    shared: Arc<Shared<O>>,
    encode: Encode,
    /// Sequence number of the next batch submitted.
    next_seq: u64,
}

impl<O: LineOutput> OrderedEncoder<O> {
    /// Writes to `output` what `encode` makes of each batch.
    pub fn new(output: O, encode: Encode) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    output,
                    next_to_write: 0,
                    done: BTreeMap::new(),
                    failed: None,
                    broken: false,
                    spare: Vec::new(),
                }),
                written: Condvar::new(),
            }),
            encode,
            next_seq: 0,
        }
    }

    /// Hands `batch` over to be encoded and written after the batches
    /// before it. Fails with an earlier batch's failure, if any.
    pub fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let mut state = self.shared.lock();
        if let Some(e) = state.failed.take() {
            return Err(e);
        }
        // Numbered only once it will be written (or skipped): a drain
        // waits for every number handed out.
        let seq = self.next_seq;
        self.next_seq += 1;
        let buffer = state.spare.pop().unwrap_or_default();
        if state.next_to_write == seq && batch.num_rows() < INLINE_ROWS {
            drop(state);
            let encoded = encode_into(&self.encode, &batch, buffer);
            self.shared.finished(seq, encoded);
            return self.take_failure();
        }
        // Back pressure: at most IN_FLIGHT batches ahead of the writer.
        while seq - state.next_to_write >= IN_FLIGHT {
            state = self
                .shared
                .written
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        drop(state);
        let shared = self.shared.clone();
        let encode = self.encode.clone();
        let job: Job = Box::new(move || {
            let encoded = encode_into(&encode, &batch, buffer);
            shared.finished(seq, encoded);
        });
        if let Err(returned) = pool().send(job) {
            // No encoding threads: encode here.
            (returned.0)();
        }
        Ok(())
    }

    /// Waits until every batch submitted is written; fails with the first
    /// failure among them.
    pub fn drain(&mut self) -> Result<()> {
        let mut state = self.shared.lock();
        while state.next_to_write < self.next_seq {
            state = self
                .shared
                .written
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
        match state.failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Drains, then runs `f` on the output (to flush it, close a part,
    /// ...).
    pub fn with_output<R>(&mut self, f: impl FnOnce(&mut O) -> Result<R>) -> Result<R> {
        self.drain()?;
        f(&mut self.shared.lock().output)
    }

    fn take_failure(&self) -> Result<()> {
        match self.shared.lock().failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Encodes `batch` into `buffer` (cleared), a panic caught as a failure.
fn encode_into(encode: &Encode, batch: &RecordBatch, mut buffer: Vec<u8>) -> Result<Vec<u8>> {
    buffer.clear();
    match catch_unwind(AssertUnwindSafe(|| encode(batch, &mut buffer))) {
        Ok(Ok(())) => Ok(buffer),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ConnectorError::Io {
            path: "encoder".into(),
            source: std::io::Error::other("encoding a batch panicked"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;

    #[derive(Clone, Default)]
    struct Collect(Arc<Mutex<Vec<u8>>>);

    impl LineOutput for Collect {
        fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(())
        }
    }

    fn batch(from: i64, rows: usize) -> RecordBatch {
        let n = Arc::new(Int64Array::from_iter_values(from..from + rows as i64)) as _;
        RecordBatch::try_from_iter([("n", n)]).unwrap()
    }

    fn lines(batch: &RecordBatch, out: &mut Vec<u8>) -> Result<()> {
        crate::json_lines::encode_json_lines(batch, out)
    }

    #[test]
    fn batches_of_every_size_come_out_in_order() {
        let seen = Collect::default();
        let mut encoder = OrderedEncoder::new(seen.clone(), Arc::new(lines));
        let mut expected = Vec::new();
        let mut from = 0;
        for i in 0..200usize {
            // Small ones encoded inline between big ones on the pool.
            let rows = [1, 3000, 17, 600, 255, 256][i % 6];
            let b = batch(from, rows);
            lines(&b, &mut expected).unwrap();
            encoder.write(b).unwrap();
            from += rows as i64;
        }
        encoder.drain().unwrap();
        assert_eq!(*seen.0.lock().unwrap(), expected);
    }

    #[test]
    fn a_batch_is_written_without_waiting_for_the_next() {
        let seen = Collect::default();
        let mut encoder = OrderedEncoder::new(seen.clone(), Arc::new(lines));
        encoder.write(batch(0, 5000)).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while seen.0.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "never written");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let mut expected = Vec::new();
        lines(&batch(0, 5000), &mut expected).unwrap();
        assert_eq!(*seen.0.lock().unwrap(), expected);
    }

    /// Encodes every batch but those of 1000 rows.
    fn failing_copy() -> Encode {
        Arc::new(|batch: &RecordBatch, out: &mut Vec<u8>| {
            if batch.num_rows() == 1000 {
                return Err(ConnectorError::bad_option("format", "cannot encode"));
            }
            lines(batch, out)
        })
    }

    #[test]
    fn a_failure_is_reported_and_nothing_after_it_written() {
        let seen = Collect::default();
        let mut encoder = OrderedEncoder::new(seen.clone(), failing_copy());
        encoder.write(batch(0, 2000)).unwrap();
        encoder.write(batch(0, 1000)).unwrap();
        let error = encoder.write(batch(0, 3000)).err();
        let error = error.or_else(|| encoder.drain().err());
        assert!(error.is_some_and(|e| e.to_string().contains("cannot encode")));
        assert!(encoder.drain().is_ok(), "reported once");
        // A write refused for an earlier failure leaves nothing to wait for:
        // draining after it returns.
        let mut encoder = OrderedEncoder::new(seen.clone(), failing_copy());
        encoder.write(batch(0, 1000)).unwrap();
        let refused = loop {
            std::thread::sleep(std::time::Duration::from_millis(1));
            match encoder.write(batch(0, 2000)) {
                Ok(()) => continue,
                Err(e) => break e,
            }
        };
        assert!(refused.to_string().contains("cannot encode"));
        assert!(encoder.drain().is_ok());
        let mut expected = Vec::new();
        lines(&batch(0, 2000), &mut expected).unwrap();
        assert_eq!(*seen.0.lock().unwrap(), expected);
    }

    #[test]
    fn a_panicking_encoder_fails_the_sink_instead_of_hanging_it() {
        let panicking: Encode = Arc::new(|_: &RecordBatch, _: &mut Vec<u8>| panic!("bug"));
        let mut encoder = OrderedEncoder::new(Collect::default(), panicking);
        encoder.write(batch(0, 4000)).unwrap();
        assert!(encoder.drain().is_err());
    }
}
