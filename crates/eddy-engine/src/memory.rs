//! Memory budgets: a bound on the bytes operator state may hold in memory,
//! for one job (`eddy run --memory-limit`, a submitted job's
//! `memory_limit`) or for every job of a server (`eddy serve
//! --memory-limit`), and the reservations nodes hold against them.
//!
//! In: each node's state size as it changes (the figure its `state_bytes`
//! gauge shows: operators' [`crate::operator::Operator::state_bytes`], a
//! change feed's table at its source), asked of every budget the job runs
//! under through the node's [`MemoryReservation`] (DataFusion's
//! `MemoryReservation::try_grow` shape). Out: the reservation grown, or a
//! [`MemoryRefused`] naming the budget, its limit, what all holders hold
//! and the largest holder, with nothing recorded. A refused node first
//! moves state to disk ([`crate::operator::Operator::spill`]) and asks
//! again; a node that cannot spill fails with
//! [`EngineError::MemoryBudget`], and with it the job, before the process
//! runs out of memory.
//!
//! Shrinking is never refused. A reservation is released when dropped (its
//! node ended), so a finished job's state no longer counts against its
//! server's budget.
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::memory::{parse_bytes, MemoryBudget, MemoryReservation};
//!
//! let server = Arc::new(MemoryBudget::new("server", parse_bytes("1 KiB").unwrap()));
//! let mut a = MemoryReservation::new(vec![server.clone()], "job-1/window_aggregate#3");
//! let mut b = MemoryReservation::new(vec![server.clone()], "job-2/over#5");
//! a.try_resize(700).unwrap();
//! let refused = b.try_resize(600).unwrap_err();
//! assert!(refused.to_string().contains("over the server's memory budget"), "{refused}");
//! assert!(refused.to_string().contains("job-1/window_aggregate#3 holds 700 B"), "{refused}");
//! assert_eq!((b.size(), server.used()), (0, 700), "a refusal records nothing");
//! drop(a); // the first job ended: its state no longer counts
//! b.try_resize(600).unwrap();
//! assert_eq!(server.used(), 600);
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::EngineError;

/// A bound on the state bytes of the nodes holding reservations against it.
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

/// A budget refused a reservation's growth: which, its limit, what its
/// holders would hold together, and its largest holder.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "over the {budget}'s memory budget: operator state would hold {} of {} ({largest} holds {})",
    format_bytes(*.wanted),
    format_bytes(*.limit),
    format_bytes(*.held)
)]
pub struct MemoryRefused {
    /// Whose budget (`job`, `server`).
    pub budget: String,
    /// Its limit, bytes.
    pub limit: u64,
    /// What all holders would hold with the growth, bytes.
    pub wanted: u64,
    /// The largest holder, by name.
    pub largest: String,
    /// What the largest holder holds, bytes.
    pub held: u64,
}

impl From<MemoryRefused> for EngineError {
    fn from(refused: MemoryRefused) -> Self {
        EngineError::MemoryBudget {
            budget: refused.budget,
            limit: refused.limit,
            used: refused.wanted,
            largest: refused.largest,
            held: refused.held,
        }
    }
}

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

    /// Records that `holder` holds `bytes`, unless that grows it past the
    /// limit: then nothing changes and the refusal says why.
    fn try_hold(&self, holder: u64, name: &str, bytes: u64) -> Result<(), MemoryRefused> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let before = held.get(&holder).map_or(0, |(_, b)| *b);
        let others: u64 = held
            .iter()
            .filter(|(h, _)| **h != holder)
            .map(|(_, (_, b))| b)
            .sum();
        if bytes > before && others + bytes > self.limit {
            let (largest, most) = held
                .iter()
                .map(|(h, (n, b))| if *h == holder { (n, bytes) } else { (n, *b) })
                .chain(std::iter::once((&name.to_string(), bytes)).filter(|_| before == 0))
                .max_by_key(|(_, b)| *b)
                .map(|(n, b)| (n.clone(), b))
                .unwrap_or_default();
            return Err(MemoryRefused {
                budget: self.name.clone(),
                limit: self.limit,
                wanted: others + bytes,
                largest,
                held: most,
            });
        }
        if bytes == 0 {
            held.remove(&holder);
        } else {
            held.insert(holder, (name.to_string(), bytes));
        }
        Ok(())
    }

    fn release(&self, holder: u64) {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&holder);
        }
    }
}

/// One node's reservation against the budgets its job runs under; released
/// when dropped.
#[derive(Debug)]
pub struct MemoryReservation {
    budgets: Vec<Arc<MemoryBudget>>,
    holder: u64,
    name: String,
    size: u64,
}

impl MemoryReservation {
    /// A reservation of nothing yet, by `name` (a node, `job/node` on a
    /// server).
    pub fn new(budgets: Vec<Arc<MemoryBudget>>, name: impl Into<String>) -> Self {
        Self {
            budgets,
            holder: NEXT_HOLDER.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            size: 0,
        }
    }

    /// The bytes it holds.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Holds `bytes` from now on: granted by every budget, or by none (a
    /// refusal leaves the reservation as it was).
    pub fn try_resize(&mut self, bytes: u64) -> Result<(), MemoryRefused> {
        for (i, budget) in self.budgets.iter().enumerate() {
            if let Err(refused) = budget.try_hold(self.holder, &self.name, bytes) {
                for granted in &self.budgets[..i] {
                    // Back to what it held: a shrink, never refused.
                    let _ = granted.try_hold(self.holder, &self.name, self.size);
                }
                return Err(refused);
            }
        }
        self.size = bytes;
        Ok(())
    }

    /// Grows it by `bytes` ([`Self::try_resize`]).
    pub fn try_grow(&mut self, bytes: u64) -> Result<(), MemoryRefused> {
        self.try_resize(self.size.saturating_add(bytes))
    }
}

impl Drop for MemoryReservation {
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
    fn shrinking_is_never_refused_and_every_budget_is_asked() {
        let job = Arc::new(MemoryBudget::new("job", 100));
        let server = Arc::new(MemoryBudget::new("server", 1000));
        let mut node = MemoryReservation::new(vec![job.clone(), server.clone()], "over#2");
        node.try_resize(90).unwrap();
        let refused = node.try_resize(150).unwrap_err();
        assert!(
            refused.to_string().contains("over the job's memory budget"),
            "{refused}"
        );
        assert!(refused.to_string().contains("150 B of 100 B"), "{refused}");
        assert_eq!((node.size(), job.used(), server.used()), (90, 90, 90));
        node.try_resize(40).unwrap();
        node.try_grow(50).unwrap();
        assert_eq!(job.used(), 90);
        drop(node);
        assert_eq!((job.used(), server.used()), (0, 0));
    }

    #[test]
    fn a_refusal_by_a_later_budget_takes_back_what_earlier_ones_granted() {
        let job = Arc::new(MemoryBudget::new("job", 1000));
        let server = Arc::new(MemoryBudget::new("server", 100));
        let mut other = MemoryReservation::new(vec![server.clone()], "job-2/x#1");
        other.try_resize(60).unwrap();
        let mut node = MemoryReservation::new(vec![job.clone(), server.clone()], "job-1/y#3");
        node.try_resize(30).unwrap();
        let refused = node.try_resize(70).unwrap_err();
        assert_eq!(refused.budget, "server");
        assert_eq!(
            (refused.wanted, refused.largest.as_str()),
            (130, "job-1/y#3")
        );
        assert_eq!((job.used(), server.used(), node.size()), (30, 90, 30));
        let failed: EngineError = refused.into();
        assert!(matches!(failed, EngineError::MemoryBudget { .. }));
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
