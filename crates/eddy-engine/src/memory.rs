//! Memory budgets: a bound on the bytes operator state may hold, for one
//! job (`eddy run --memory-limit`, a submitted job's `memory_limit`) or for
//! every job of a server (`eddy serve --memory-limit`).
//!
//! In: each node's state size as it changes (the same figure its
//! `state_bytes` gauge shows: operators' [`crate::operator::Operator::state_bytes`],
//! a change feed's table at its source), charged to every budget the job
//! runs under. Out: `Ok`, or [`EngineError::MemoryBudget`] naming the
//! budget, its limit, what all holders hold and the largest holder — the
//! node that charged fails, and with it the job, before the process runs
//! out of memory (the figure is refreshed every 200 ms, so a budget can be
//! passed by what one node adds in that time).
//!
//! A node's charge is released when the node ends, so a finished job's
//! state no longer counts against its server's budget.
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::memory::{parse_bytes, Charge, MemoryBudget};
//!
//! let server = Arc::new(MemoryBudget::new("server", parse_bytes("1 KiB").unwrap()));
//! let a = Charge::new(vec![server.clone()], "job-1/window_aggregate#3");
//! let b = Charge::new(vec![server.clone()], "job-2/over#5");
//! a.set(700).unwrap();
//! let err = b.set(600).unwrap_err().to_string();
//! assert!(err.contains("over the server's memory budget"), "{err}");
//! assert!(err.contains("job-1/window_aggregate#3 holds 700 B"), "{err}");
//! drop(a); // the first job ended: its state no longer counts
//! b.set(600).unwrap();
//! assert_eq!(server.used(), 600);
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{EngineError, Result};

/// A bound on the state bytes of the nodes charged to it.
#[derive(Debug)]
pub struct MemoryBudget {
    /// Whose budget it is (`job`, `server`), for errors.
    name: String,
    limit: u64,
    /// What each holder holds now.
    held: Mutex<BTreeMap<u64, (String, u64)>>,
}

/// Holder ids, unique in the process.
static NEXT_HOLDER: AtomicU64 = AtomicU64::new(0);

impl MemoryBudget {
    /// A budget of `limit` bytes, named `name` in errors.
    pub fn new(name: impl Into<String>, limit: u64) -> Self {
        Self {
            name: name.into(),
            limit,
            held: Mutex::new(BTreeMap::new()),
        }
    }

    /// Its limit in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// What its holders hold now.
    pub fn used(&self) -> u64 {
        self.held
            .lock()
            .map(|h| h.values().map(|(_, b)| b).sum())
            .unwrap_or(0)
    }

    /// Records that `holder` holds `bytes`; an error when that puts the
    /// budget over its limit (the charge stands: the caller fails).
    fn charge(&self, holder: u64, name: &str, bytes: u64) -> Result<()> {
        let Ok(mut held) = self.held.lock() else {
            return Ok(());
        };
        let before = held.get(&holder).map_or(0, |(_, b)| *b);
        if bytes == 0 {
            held.remove(&holder);
        } else {
            held.insert(holder, (name.to_string(), bytes));
        }
        let used: u64 = held.values().map(|(_, b)| b).sum();
        if bytes <= before || used <= self.limit {
            return Ok(());
        }
        let (largest, most) = held
            .values()
            .max_by_key(|(_, b)| *b)
            .map(|(n, b)| (n.clone(), *b))
            .unwrap_or_default();
        Err(EngineError::MemoryBudget {
            budget: self.name.clone(),
            limit: self.limit,
            used,
            largest,
            held: most,
        })
    }

    fn release(&self, holder: u64) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&holder);
        }
    }
}

/// One node's charge against the budgets its job runs under; released
/// when dropped.
#[derive(Debug)]
pub struct Charge {
    budgets: Vec<Arc<MemoryBudget>>,
    holder: u64,
    name: String,
}

impl Charge {
    /// A charge of nothing yet, by `name` (a node, `job/node` on a server).
    pub fn new(budgets: Vec<Arc<MemoryBudget>>, name: impl Into<String>) -> Self {
        Self {
            budgets,
            holder: NEXT_HOLDER.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
        }
    }

    /// The holder now holds `bytes`.
    pub fn set(&self, bytes: u64) -> Result<()> {
        for budget in &self.budgets {
            budget.charge(self.holder, &self.name, bytes)?;
        }
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        for budget in &self.budgets {
            budget.release(self.holder);
        }
    }
}

/// Why a text is not a byte size ([`parse_bytes`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// A unit eddy does not know.
    #[error("'{unit}' is not a size unit (use B, KB, KiB, MB, MiB, GB, GiB)")]
    Unit { unit: String },
    /// No number where one was expected.
    #[error("'{text}' is not a size")]
    NotASize { text: String },
}

/// A byte size: a number with an optional unit (`64MB`, `1 GiB`, `500k`;
/// KB, MB, GB are powers of 1000, KiB, MiB, GiB of 1024).
pub fn parse_bytes(text: &str) -> std::result::Result<u64, SizeError> {
    let lower = text.trim().to_ascii_lowercase();
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(split);
    let scale: f64 = match unit.trim() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "kib" => 1024.0,
        "m" | "mb" => 1e6,
        "mib" => 1024.0 * 1024.0,
        "g" | "gb" => 1e9,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(SizeError::Unit {
                unit: other.to_string(),
            })
        }
    };
    let number: f64 = number.parse().map_err(|_| SizeError::NotASize {
        text: text.to_string(),
    })?;
    Ok((number * scale) as u64)
}

/// `n` bytes for people: `512 B`, `3.2 MiB`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if n >= size {
            return format!("{:.1} {unit}", n as f64 / size as f64);
        }
    }
    format!("{n} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinking_is_never_refused_and_every_budget_is_charged() {
        let job = Arc::new(MemoryBudget::new("job", 100));
        let server = Arc::new(MemoryBudget::new("server", 1000));
        let node = Charge::new(vec![job.clone(), server.clone()], "over#2");
        node.set(90).unwrap();
        let err = node.set(150).unwrap_err().to_string();
        assert!(err.contains("over the job's memory budget"), "{err}");
        assert!(err.contains("150 B of 100 B"), "{err}");
        // Going down while over is fine (state is being freed).
        node.set(120).unwrap();
        assert_eq!(job.used(), 120);
        drop(node);
        assert_eq!((job.used(), server.used()), (0, 0));
    }

    #[test]
    fn sizes_parse_with_their_units() {
        assert_eq!(parse_bytes("64MB").unwrap(), 64_000_000);
        assert_eq!(parse_bytes("1 GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("500k").unwrap(), 500_000);
        let unit = parse_bytes("5 parsecs").unwrap_err();
        assert_eq!(
            unit,
            SizeError::Unit {
                unit: "parsecs".into()
            }
        );
        assert!(unit.to_string().contains("not a size unit"), "{unit}");
        assert!(matches!(
            parse_bytes("1.2.3 MB"),
            Err(SizeError::NotASize { .. })
        ));
        assert_eq!(format_bytes(3 << 20), "3.0 MiB");
    }
}
