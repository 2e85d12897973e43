//! Running statistics by Welford's online algorithm: count, mean and the sum
//! of squared deviations, updated one value at a time in O(1) state and
//! merged exactly (Chan et al.), so partial and final aggregation agree.
//!
//! In: values one at a time (or whole states to merge). Out: the mean,
//! population variance and standard deviation, or the reference
//! pipeline's cold-start-guarded anomaly threshold ([`WelfordOutput`]).
//! eddy's `welford_*` and `dynamic_threshold` aggregate functions and the
//! OVER operator's native running aggregates both compute through here.
//!
//! ```
//! use eddy_engine::running_stats::{Welford, WelfordOutput};
//!
//! let mut w = Welford::default();
//! for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
//!     w.push(x);
//! }
//! assert_eq!(WelfordOutput::Mean.value(&w), Some(5.0));
//! assert_eq!(WelfordOutput::StddevPop.value(&w), Some(2.0));
//! ```

/// Running count, mean and sum of squared deviations.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Welford {
    /// Values seen.
    pub count: u64,
    /// Their mean.
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
}

impl Welford {
    /// Adds one value.
    pub fn push(&mut self, x: f64) {
        self.count += 1;
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
    }

    /// Merges another state (Chan et al.'s parallel formula).
    pub fn merge(&mut self, other: Welford) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other;
            return;
        }
        let count = self.count + other.count;
        let delta = other.mean - self.mean;
        self.mean += delta * other.count as f64 / count as f64;
        self.m2 += other.m2 + delta * delta * self.count as f64 * other.count as f64 / count as f64;
        self.count = count;
    }

    /// Population variance (NULL with no values).
    pub fn var_pop(&self) -> Option<f64> {
        (self.count > 0).then(|| (self.m2 / self.count as f64).max(0.0))
    }
}

/// What a Welford-based function returns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WelfordOutput {
    /// The mean (NULL with no values).
    Mean,
    /// The population variance.
    VarPop,
    /// The population standard deviation.
    StddevPop,
    /// `floor` while fewer than `min_samples` values were seen, then
    /// `mean + k * stddev_pop`.
    Threshold {
        /// Standard deviations above the mean.
        k: f64,
        /// The value before enough samples.
        floor: f64,
        /// Samples needed before the mean and deviation count.
        min_samples: u64,
    },
}

impl WelfordOutput {
    /// The function's value over the values `w` has seen.
    pub fn value(&self, w: &Welford) -> Option<f64> {
        match *self {
            WelfordOutput::Mean => (w.count > 0).then_some(w.mean),
            WelfordOutput::VarPop => w.var_pop(),
            WelfordOutput::StddevPop => w.var_pop().map(f64::sqrt),
            WelfordOutput::Threshold {
                k,
                floor,
                min_samples,
            } => {
                if w.count >= min_samples.max(1) {
                    w.var_pop().map(|v| w.mean + k * v.sqrt())
                } else {
                    Some(floor)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_pass(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        (mean, var)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-300)
    }

    #[test]
    fn welford_matches_two_pass_reference() {
        let mut seed = 0x1234_5678_u64;
        for n in [1usize, 2, 5, 100, 10_000] {
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    1e6 + (seed % 100_000) as f64 / 7.0
                })
                .collect();
            let mut w = Welford::default();
            values.iter().for_each(|x| w.push(*x));
            let (mean, var) = two_pass(&values);
            assert!(close(w.mean, mean), "mean n={n}");
            assert!(
                close(w.var_pop().unwrap(), var) || var < 1e-12,
                "var n={n}: {} vs {var}",
                w.var_pop().unwrap()
            );
            // Merging halves gives the same state.
            let (a, b) = values.split_at(n / 2);
            let (mut wa, mut wb) = (Welford::default(), Welford::default());
            a.iter().for_each(|x| wa.push(*x));
            b.iter().for_each(|x| wb.push(*x));
            wa.merge(wb);
            assert!(
                close(wa.mean, mean) && (close(wa.var_pop().unwrap(), var) || var < 1e-12),
                "merge n={n}"
            );
        }
    }

    #[test]
    fn threshold_uses_the_floor_until_enough_samples() {
        let output = WelfordOutput::Threshold {
            k: 3.0,
            floor: 5000.0,
            min_samples: 5,
        };
        let mut w = Welford::default();
        assert_eq!(output.value(&w), Some(5000.0));
        for x in [99.66, 119.66, 104.66, 114.66] {
            w.push(x);
        }
        assert_eq!(output.value(&w), Some(5000.0));
        w.push(109.66);
        let t = output.value(&w).unwrap();
        assert!((t - (109.66 + 3.0 * 50f64.sqrt())).abs() < 1e-9, "{t}");
        assert_eq!(format!("{:.2}", t), "130.87");
    }
}
