//! The statistics of `attnlab report`: evaluation blocks, mean ± std over seeds, the paired
//! bootstrap interval of a loss difference, and the four verdicts a claim can get.

use attnlab_core::rng::SplitMix64;

/// Default tokens per evaluation block of the bootstrap: consecutive windows are grouped until a
/// block holds at least this many tokens (a window longer than that is a block of its own). Blocks
/// of this size span a good part of a Brown document, so neighbouring blocks are nearly independent.
pub const BLOCK_TOKENS: usize = 2048;
/// Fewest blocks an interval is computed from (fewer: the claim is not tested).
pub const MIN_BLOCKS: usize = 10;
/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2000;
/// Two-sided coverage of the intervals.
pub const COVERAGE: f64 = 0.95;
/// Seed of the bootstrap's resampling (the report is reproducible run to run).
pub const BOOTSTRAP_SEED: u64 = 0x00B0_075A_3D11;

/// Mean loss (nats/token) of each evaluation block, from the mean loss of each window (all windows
/// of one length score the same number of tokens, so a block's mean is the mean of its windows').
pub fn block_means(window_means: &[f64], window_tokens: usize, block_tokens: usize) -> Vec<f64> {
    let per_block = block_tokens.div_ceil(window_tokens.max(1)).max(1);
    window_means.chunks(per_block).map(|c| c.iter().sum::<f64>() / c.len() as f64).collect()
}

/// Mean and sample standard deviation (n − 1; 0 for a single value, NaN for none).
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    (mean, var.sqrt())
}

/// A point estimate with its bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
}

/// Paired bootstrap interval of a mean difference. `diffs[s][b]` is model A's minus model B's mean
/// loss on block `b` for seed pair `s` (both models scored on the same blocks). Each resample draws
/// seed pairs with replacement, then blocks with replacement within each drawn pair, and averages;
/// with one seed pair only the evaluation noise is resampled. Percentile interval at [`COVERAGE`].
/// None when there is no block or the pairs disagree on the block count.
pub fn paired_bootstrap(diffs: &[Vec<f64>], resamples: usize, seed: u64) -> Option<Interval> {
    let blocks = diffs.first()?.len();
    if blocks == 0 || diffs.iter().any(|d| d.len() != blocks) || resamples == 0 {
        return None;
    }
    let mean = diffs.iter().flatten().sum::<f64>() / (diffs.len() * blocks) as f64;
    let mut rng = SplitMix64::new(seed);
    let mut pick = |n: usize| ((rng.next_f64() * n as f64) as usize).min(n - 1);
    let mut stats: Vec<f64> = (0..resamples)
        .map(|_| {
            let mut total = 0.0;
            for _ in 0..diffs.len() {
                let d = &diffs[pick(diffs.len())];
                total += (0..blocks).map(|_| d[pick(blocks)]).sum::<f64>();
            }
            total / (diffs.len() * blocks) as f64
        })
        .collect();
    stats.sort_by(f64::total_cmp);
    let at = |q: f64| stats[((q * resamples as f64) as usize).min(resamples - 1)];
    let tail = (1.0 - COVERAGE) / 2.0;
    Some(Interval { mean, lo: at(tail), hi: at(1.0 - tail) })
}

/// What a claim about a loss difference Δ = loss(A) − loss(B) (nats/token) needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    /// A is better than B by the margin: Δ < −margin (margin 0: A beats B).
    Below { margin: f64 },
    /// A is no worse than B by more than the margin: Δ < margin (non-inferiority).
    NoWorse { margin: f64 },
    /// A and B are within the margin of each other: |Δ| < margin (a reversal is not "close").
    Within { margin: f64 },
}

impl Rule {
    /// The rule in words, for the report's "test" column.
    pub fn describe(&self) -> String {
        let pct = |m: f64| format!("{:.0} %", 100.0 * (m.exp() - 1.0));
        match *self {
            Rule::Below { margin: 0.0 } => "Δ < 0".into(),
            Rule::Below { margin } => format!("Δ < −ln(1 + {})", pct(margin)),
            Rule::NoWorse { margin } => format!("Δ < ln(1 + {}) (no worse)", pct(margin)),
            Rule::Within { margin } => format!("|Δ| < ln(1 + {}) (close)", pct(margin)),
        }
    }

    /// The verdict on an interval of Δ: holds when the whole interval satisfies the rule, does not
    /// hold when none of it does, inconclusive when it straddles the threshold.
    pub fn decide(&self, i: &Interval) -> Verdict {
        let (inside, outside) = match *self {
            Rule::Below { margin } => (i.hi < -margin, i.lo >= -margin),
            Rule::NoWorse { margin } => (i.hi < margin, i.lo >= margin),
            Rule::Within { margin } => (i.lo > -margin && i.hi < margin, i.hi <= -margin || i.lo >= margin),
        };
        if inside {
            Verdict::Holds
        } else if outside {
            Verdict::DoesNotHold
        } else {
            Verdict::Inconclusive
        }
    }
}

/// A claim's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Holds,
    DoesNotHold,
    /// The interval straddles the rule's threshold.
    Inconclusive,
    /// The claim could not be tested here; the reason is printed.
    NotTested(String),
}

impl Verdict {
    /// A point rule (one measurement without an interval): holds or does not hold.
    pub fn from_point(holds: Option<bool>, missing: &str) -> Verdict {
        match holds {
            Some(true) => Verdict::Holds,
            Some(false) => Verdict::DoesNotHold,
            None => Verdict::NotTested(missing.to_string()),
        }
    }

    pub fn markdown(&self) -> String {
        match self {
            Verdict::Holds => "**holds**".into(),
            Verdict::DoesNotHold => "**does not hold**".into(),
            Verdict::Inconclusive => "**inconclusive**".into(),
            Verdict::NotTested(why) => format!("not tested: {why}"),
        }
    }
}

/// Mean loss at each position of the windows, averaged in bins whose edges double from 1
/// (positions 1, 2–3, 4–7, …): `(first position, last position, mean loss)`. `sums[p]` is the
/// summed loss of position p + 1 (position 0 is never scored) over `windows` windows.
pub fn octave_bins(sums: &[f64], windows: usize) -> Vec<(usize, usize, f64)> {
    let mut out = Vec::new();
    let mut lo = 1;
    while lo <= sums.len() {
        let hi = (2 * lo - 1).min(sums.len());
        let total: f64 = sums[lo - 1..hi].iter().sum();
        out.push((lo, hi, total / ((hi - lo + 1) * windows.max(1)) as f64));
        lo *= 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn blocks_group_windows_to_the_block_size() {
        // 128-token windows: 16 per block; the last block takes the rest.
        let w: Vec<f64> = (0..40).map(f64::from).collect();
        let b = block_means(&w, 128, BLOCK_TOKENS);
        assert_eq!(b.len(), 3);
        assert_eq!(b[0], 7.5);
        assert_eq!(b[2], (32..40).map(f64::from).sum::<f64>() / 8.0);
        // Windows longer than a block are blocks of their own.
        assert_eq!(block_means(&w, 4096, BLOCK_TOKENS), w);
        assert_eq!(block_means(&w, 128, 256).len(), 20);
    }

    #[test]
    fn mean_std_of_known_values() {
        let (m, s) = mean_std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((s - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(mean_std(&[3.0]), (3.0, 0.0));
        assert!(mean_std(&[]).0.is_nan());
    }

    #[test]
    fn a_constant_difference_has_a_point_interval() {
        let i = paired_bootstrap(&[vec![0.25; 30]], 500, 1).unwrap();
        assert_eq!((i.mean, i.lo, i.hi), (0.25, 0.25, 0.25));
    }

    #[test]
    fn the_interval_narrows_with_more_blocks_and_widens_with_seed_noise() {
        let noisy = |n: usize, seed: u64| -> Vec<f64> {
            let mut r = SplitMix64::new(seed);
            (0..n).map(|_| 0.1 + (r.next_f64() - 0.5)).collect()
        };
        let width = |i: Interval| i.hi - i.lo;
        let few = paired_bootstrap(&[noisy(20, 3)], RESAMPLES, 7).unwrap();
        let many = paired_bootstrap(&[noisy(2000, 3)], RESAMPLES, 7).unwrap();
        assert!(width(many) < 0.3 * width(few), "{many:?} vs {few:?}");
        // Three seed pairs that disagree by ±0.2 nats: wider than any one pair's eval noise.
        let seeds: Vec<Vec<f64>> = [-0.2, 0.0, 0.2].iter().map(|o| vec![0.1 + o; 200]).collect();
        let i = paired_bootstrap(&seeds, RESAMPLES, 7).unwrap();
        assert!(i.lo < -0.05 && i.hi > 0.25, "{i:?}");
        assert!((i.mean - 0.1).abs() < 1e-12);
    }

    #[test]
    fn mismatched_or_empty_blocks_give_no_interval() {
        assert!(paired_bootstrap(&[], 10, 1).is_none());
        assert!(paired_bootstrap(&[vec![]], 10, 1).is_none());
        assert!(paired_bootstrap(&[vec![1.0, 2.0], vec![1.0]], 10, 1).is_none());
    }

    #[test]
    fn verdicts_follow_the_interval() {
        let i = |lo, hi| Interval { mean: 0.5 * (lo + hi), lo, hi };
        let beats = Rule::Below { margin: 0.0 };
        assert_eq!(beats.decide(&i(-0.3, -0.1)), Verdict::Holds);
        assert_eq!(beats.decide(&i(-0.004, 0.009)), Verdict::Inconclusive);
        assert_eq!(beats.decide(&i(0.01, 0.2)), Verdict::DoesNotHold);
        let close = Rule::Within { margin: 0.05 };
        assert_eq!(close.decide(&i(-0.02, 0.03)), Verdict::Holds);
        // A large reversal is not "close".
        assert_eq!(close.decide(&i(-0.3, -0.2)), Verdict::DoesNotHold);
        assert_eq!(close.decide(&i(0.03, 0.07)), Verdict::Inconclusive);
        let no_worse = Rule::NoWorse { margin: 0.01 };
        assert_eq!(no_worse.decide(&i(-0.3, 0.005)), Verdict::Holds);
        assert_eq!(no_worse.decide(&i(0.02, 0.05)), Verdict::DoesNotHold);
        assert_eq!(Rule::Within { margin: 0.05f64.ln_1p() }.describe(), "|Δ| < ln(1 + 5 %) (close)");
    }

    #[test]
    fn octave_bins_average_their_positions() {
        // Positions 1..=10, loss = position, one window.
        let sums: Vec<f64> = (1..=10).map(f64::from).collect();
        let b = octave_bins(&sums, 1);
        assert_eq!(b, vec![(1, 1, 1.0), (2, 3, 2.5), (4, 7, 5.5), (8, 10, 9.0)]);
        assert_eq!(octave_bins(&[4.0, 6.0], 2), vec![(1, 1, 2.0), (2, 2, 3.0)]);
    }

    proptest! {
        #[test]
        fn the_interval_brackets_the_resampled_statistic(
            d in prop::collection::vec(-2.0f64..2.0, 1..60),
            shift in -1.0f64..1.0,
        ) {
            let i = paired_bootstrap(std::slice::from_ref(&d), 400, 5).unwrap();
            let lo = d.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = d.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(lo - 1e-12 <= i.lo && i.lo <= i.hi && i.hi <= hi + 1e-12);
            // Shifting every difference shifts the interval by as much (same resamples).
            let s = paired_bootstrap(&[d.iter().map(|x| x + shift).collect()], 400, 5).unwrap();
            prop_assert!((s.lo - i.lo - shift).abs() < 1e-9 && (s.hi - i.hi - shift).abs() < 1e-9);
        }
    }
}
