//! How many parallel instances of each keyed operator a job runs
//! ([`Parallelism`]: `--parallelism`, or the checkpoint's N). The graph
//! with the instances in is [`crate::distribute::instances`]'s; a
//! checkpoint taken at another N is moved to it by [`crate::rescale`].

use crate::error::Result;

/// How many instances of each keyed operator a job runs (`--parallelism`).
///
/// ```
/// use eddy_engine::parallel::Parallelism;
///
/// // Resuming a checkpoint taken with 4 instances: 4, whatever the machine.
/// assert_eq!(Parallelism::Resumed { fresh: 2 }.resolve(Some(4)).unwrap(), 4);
/// // Starting afresh: the N it was given.
/// assert_eq!(Parallelism::Resumed { fresh: 2 }.resolve(None).unwrap(), 2);
/// // An explicit N wins: the checkpoint's state is spread over it.
/// assert_eq!(Parallelism::Fixed(2).resolve(Some(4)).unwrap(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallelism {
    /// Exactly N instances (0 counts as 1); a checkpoint taken with
    /// another N is rescaled to it.
    Fixed(usize),
    /// The N of the checkpoint the job resumes from, and `fresh` instances
    /// when it starts afresh.
    Resumed {
        /// Instances of a job that starts without a checkpoint.
        fresh: usize,
    },
}

impl Default for Parallelism {
    /// One instance per core of the machine, or the checkpoint's N.
    fn default() -> Self {
        Parallelism::Resumed {
            fresh: machine_cores(),
        }
    }
}

impl Parallelism {
    /// The instances to run, given the N the checkpoint to resume was
    /// taken with (`None`: no checkpoint).
    pub fn resolve(self, checkpointed: Option<usize>) -> Result<usize> {
        match (self, checkpointed) {
            (Parallelism::Resumed { .. }, Some(n)) => Ok(n.max(1)),
            (Parallelism::Resumed { fresh }, None) => Ok(fresh.max(1)),
            (Parallelism::Fixed(n), _) => Ok(n.max(1)),
        }
    }
}

/// The cores this process may use (1 when the system does not say).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
