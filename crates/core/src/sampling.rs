//! Token sampling: a portable seeded RNG, temperature / top-k / top-p, and f64 softmax helpers.
//!
//! Everything here is plain integer and f64 arithmetic, so native and wasm32 builds draw the same
//! tokens for the same seed and logits.
//!
//! # Sampling procedure ([`Sampler::sample`])
//!
//! 1. NaN logits count as −∞ (never chosen). No logits, or none finite and none +∞ →
//!    [`Error::InvalidArgument`].
//! 2. Greedy — `temperature == 0`, or some logit is +∞: the largest logit wins, ties to the
//!    lowest id (among several +∞, the lowest id).
//! 3. Otherwise p_i = softmax(l_i / T), computed in f64 with the maximum subtracted. Tokens with
//!    p_i == 0 (−∞ logits, or underflow) are dropped. The rest are sorted by probability
//!    descending, ties by id ascending.
//! 4. top-k (`top_k > 0`): keep the first `top_k`.
//! 5. top-p (`top_p < 1`): renormalise the kept set, then keep the smallest prefix whose
//!    cumulative probability is ≥ `top_p` (always at least one token).
//! 6. Renormalise and draw with one `u = next_f64()`: the first token in the sorted order whose
//!    cumulative probability exceeds `u · total`.
//!
//! RNG stream: a sampler with `temperature > 0` consumes exactly one `next_f64()` per call, even
//! when the choice is forced (a single candidate or a +∞ logit); with `temperature == 0` it
//! consumes none. The number of draws therefore never depends on the logits.

use crate::{Error, Result};

/// SplitMix64-seeded xoshiro256** pseudo-random generator.
///
/// * Seeding: the 256-bit state `s[0..4]` is four successive outputs of SplitMix64 started at
///   `seed` (`x += 0x9E3779B97F4A7C15; z = x; z = (z ^ z>>30)·0xBF58476D1CE4E5B9;
///   z = (z ^ z>>27)·0x94D049BB133111EB; out = z ^ z>>31`, all wrapping mod 2⁶⁴). SplitMix64
///   never yields an all-zero state from four consecutive outputs, which xoshiro requires.
/// * Output (xoshiro256**, Blackman & Vigna 2018): `result = rotl(s1·5, 7)·9`; then
///   `t = s1<<17; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 45)`.
/// * [`Rng::next_f64`]: the top 53 bits of `next_u64()` times 2⁻⁵³, uniform on [0, 1).
///
/// Only wrapping u64 arithmetic is used, so the stream is identical on every platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose state is seeded from `seed` with SplitMix64.
    pub fn new(seed: u64) -> Rng {
        let mut sm = crate::rng::SplitMix64::new(seed);
        let s = [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()];
        Rng { s }
    }

    /// The next 64 random bits (xoshiro256**).
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform f64 in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Sampling settings, as stored in requests and the UI.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SamplingConfig {
    /// Softmax temperature; 0 = greedy (argmax).
    pub temperature: f32,
    /// Keep only the `top_k` most probable tokens; 0 = off.
    pub top_k: usize,
    /// Nucleus sampling: keep the smallest set of most probable tokens with cumulative
    /// probability ≥ `top_p`; 1 = off.
    pub top_p: f32,
    /// RNG seed.
    pub seed: u64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig { temperature: 0.8, top_k: 0, top_p: 1.0, seed: 0 }
    }
}

impl SamplingConfig {
    /// `temperature` finite and ≥ 0; `top_p` in (0, 1]. Errors name the field.
    pub fn validate(&self) -> Result<()> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(Error::arg(
                "temperature",
                format!("{} must be a finite number >= 0 (0 = greedy)", self.temperature),
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::arg("top_p", format!("{} must be in (0, 1] (1 = off)", self.top_p)));
        }
        Ok(())
    }
}

/// The tokens a sampler may pick for one set of logits.
enum Choice {
    /// A forced choice (greedy, or a +∞ logit).
    Forced(u32),
    /// Candidates sorted by probability descending (ties: id ascending), with renormalised
    /// probabilities summing to 1 (up to rounding); never empty.
    Weighted(Vec<(u32, f64)>),
}

/// A seeded sampler: [`SamplingConfig`] plus its RNG stream.
#[derive(Debug, Clone)]
pub struct Sampler {
    cfg: SamplingConfig,
    rng: Rng,
    /// Only ids below this are picked (see [`Sampler::limit_vocab`]).
    vocab_limit: Option<usize>,
}

impl Sampler {
    /// Validate `cfg` and seed the RNG with `cfg.seed`.
    pub fn new(cfg: SamplingConfig) -> Result<Sampler> {
        cfg.validate()?;
        Ok(Sampler { cfg, rng: Rng::new(cfg.seed), vocab_limit: None })
    }

    /// Pick only among the first `n` ids: the ids a tokenizer can decode when the model's vocabulary
    /// is padded beyond it (Pythia: 50,304 logits for a 50,277-id tokenizer).
    pub fn limit_vocab(mut self, n: usize) -> Sampler {
        self.vocab_limit = Some(n.max(1));
        self
    }

    /// The limit set by [`Sampler::limit_vocab`].
    pub fn vocab_limit(&self) -> Option<usize> {
        self.vocab_limit
    }

    /// The settings this sampler was built with.
    pub fn config(&self) -> &SamplingConfig {
        &self.cfg
    }

    /// Pick the next token id from `logits` (one per vocabulary entry); see the module docs for
    /// the exact procedure. Greedy when `temperature == 0` (ties → lowest id); NaN logits are
    /// never chosen; a +∞ logit is chosen greedily; no finite or +∞ logit →
    /// [`Error::InvalidArgument`].
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32> {
        let logits = &logits[..self.vocab_limit.map_or(logits.len(), |n| n.min(logits.len()))];
        let choice = self.choice(logits)?;
        if self.cfg.temperature == 0.0 {
            // Greedy: no RNG use at all.
            return match choice {
                Choice::Forced(id) => Ok(id),
                Choice::Weighted(c) => Ok(c[0].0),
            };
        }
        // Exactly one draw per call when temperature > 0 (see the module docs).
        let u = self.rng.next_f64();
        Ok(match choice {
            Choice::Forced(id) => id,
            Choice::Weighted(cands) => {
                let total: f64 = cands.iter().map(|&(_, p)| p).sum();
                let target = u * total;
                let mut cum = 0.0;
                let mut picked = cands[cands.len() - 1].0;
                for &(id, p) in &cands {
                    cum += p;
                    if target < cum {
                        picked = id;
                        break;
                    }
                }
                picked
            }
        })
    }

    /// The uniform draw [`Sampler::sample`] would make for its next token, advancing the RNG the
    /// same way: `Some(u)` with u ∈ [0, 1) when temperature > 0, `None` (no RNG use) when greedy.
    /// For backends that pick the token on their device (attnlab-gpu) from the same random stream.
    pub fn draw(&mut self) -> Option<f64> {
        (self.cfg.temperature > 0.0).then(|| self.rng.next_f64())
    }

    /// The distribution [`Sampler::sample`] draws from for `logits`: one probability per id,
    /// after temperature, top-k and top-p, renormalised (one-hot when the choice is greedy).
    /// Does not advance the RNG. Useful for displays and tests.
    pub fn probabilities(&self, logits: &[f32]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; logits.len()];
        match self.choice(logits)? {
            Choice::Forced(id) => out[id as usize] = 1.0,
            Choice::Weighted(cands) => {
                let total: f64 = cands.iter().map(|&(_, p)| p).sum();
                for (id, p) in cands {
                    out[id as usize] = p / total;
                }
            }
        }
        Ok(out)
    }

    fn choice(&self, logits: &[f32]) -> Result<Choice> {
        if logits.is_empty() {
            return Err(Error::arg("logits", "no logits to sample from"));
        }
        if u32::try_from(logits.len()).is_err() {
            return Err(Error::arg("logits", "more than 2^32 logits"));
        }
        // Greedy scan: NaN counts as -inf; ties go to the lowest id (strict > keeps the first).
        let mut best: Option<(usize, f32)> = None;
        for (i, &l) in logits.iter().enumerate() {
            if l.is_nan() || l == f32::NEG_INFINITY {
                continue;
            }
            if best.is_none_or(|(_, b)| l > b) {
                best = Some((i, l));
            }
        }
        let Some((best_id, best_logit)) = best else {
            return Err(Error::arg("logits", "every logit is NaN or -inf: nothing can be sampled"));
        };
        if self.cfg.temperature == 0.0 || best_logit == f32::INFINITY {
            return Ok(Choice::Forced(best_id as u32));
        }

        // softmax(l / T) in f64, max subtracted; only finite logits remain here.
        let t = f64::from(self.cfg.temperature);
        let max = f64::from(best_logit) / t;
        let mut cands: Vec<(u32, f64)> = logits
            .iter()
            .enumerate()
            .filter(|(_, l)| l.is_finite())
            .map(|(i, &l)| (i as u32, (f64::from(l) / t - max).exp()))
            .filter(|&(_, w)| w > 0.0)
            .collect();
        // The maximum itself has weight exp(0) = 1, so `cands` is never empty.
        cands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));

        if self.cfg.top_k > 0 && self.cfg.top_k < cands.len() {
            cands.truncate(self.cfg.top_k);
        }
        if self.cfg.top_p < 1.0 {
            let p = f64::from(self.cfg.top_p);
            let total: f64 = cands.iter().map(|&(_, w)| w).sum();
            let mut cum = 0.0;
            let mut keep = cands.len();
            for (n, &(_, w)) in cands.iter().enumerate() {
                cum += w / total;
                if cum >= p {
                    keep = n + 1;
                    break;
                }
            }
            cands.truncate(keep);
        }
        let total: f64 = cands.iter().map(|&(_, w)| w).sum();
        for c in &mut cands {
            c.1 /= total;
        }
        Ok(Choice::Weighted(cands))
    }
}

/// log softmax(logits) in f64 (max subtracted, log-sum-exp).
///
/// NaN counts as −∞. If some logits are +∞ they share the mass equally (ln(1/m)) and every other
/// entry is −∞. If no logit is finite or +∞, every entry is −∞ (there is no distribution). An
/// empty slice gives an empty vector.
pub fn log_softmax(logits: &[f32]) -> Vec<f64> {
    let clean = |l: f32| {
        if l.is_nan() {
            f64::NEG_INFINITY
        } else {
            f64::from(l)
        }
    };
    let n_pos_inf = logits.iter().filter(|&&l| l == f32::INFINITY).count();
    if n_pos_inf > 0 {
        let share = -(n_pos_inf as f64).ln();
        return logits.iter().map(|&l| if l == f32::INFINITY { share } else { f64::NEG_INFINITY }).collect();
    }
    let max = logits.iter().map(|&l| clean(l)).fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return vec![f64::NEG_INFINITY; logits.len()];
    }
    let sum: f64 = logits.iter().map(|&l| (clean(l) - max).exp()).sum();
    let lse = max + sum.ln();
    logits.iter().map(|&l| clean(l) - lse).collect()
}

/// softmax(logits) in f64: `exp` of [`log_softmax`], with the same conventions.
pub fn softmax(logits: &[f32]) -> Vec<f64> {
    log_softmax(logits).into_iter().map(f64::exp).collect()
}

#[cfg(test)]
mod tests {
    use super::Rng;
    use super::*;
    use proptest::prelude::*;

    fn sampler(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
        Sampler::new(SamplingConfig { temperature, top_k, top_p, seed }).expect("valid config")
    }

    /// `draw` hands out the very draw `sample` would use, and nothing when greedy.
    #[test]
    fn draw_is_the_samplers_own_draw() {
        let mut greedy = sampler(0.0, 0, 1.0, 4);
        assert_eq!(greedy.draw(), None);
        assert_eq!(greedy.rng, Rng::new(4));
        let mut a = sampler(0.7, 0, 1.0, 9);
        let mut rng = Rng::new(9);
        assert_eq!(a.draw(), Some(rng.next_f64()));
        // After a draw, `sample` continues with the next number of the same stream.
        let logits = [0.0f32, 0.0];
        let mut b = sampler(0.7, 0, 1.0, 9);
        b.rng.next_f64();
        assert_eq!(a.sample(&logits).expect("sample"), b.sample(&logits).expect("sample"));
        assert_eq!(a.rng, b.rng);
    }

    #[test]
    fn xoshiro_reference_vectors() {
        // Reference C implementation with state {1, 2, 3, 4}.
        let mut r = Rng { s: [1, 2, 3, 4] };
        let got: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(got, [11520, 0, 1509978240, 1215971899390074240]);
        // SplitMix64 from seed 0: first output 0xE220A8397B1DCDAF.
        assert_eq!(crate::rng::SplitMix64::new(0).next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(Rng::new(0).s[0], 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn rng_same_seed_same_stream_and_f64_range() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let xa: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..100).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..100).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        let mut r = Rng::new(7);
        let mut mean = 0.0;
        for _ in 0..10_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            mean += f / 10_000.0;
        }
        assert!((mean - 0.5).abs() < 0.01, "{mean}");
    }

    const LOGITS: [f32; 6] = [0.3, 1.2, -0.7, 2.0, 0.0, 1.1];

    #[test]
    fn identical_seed_identical_sequence() {
        let mut a = sampler(1.0, 0, 1.0, 99);
        let mut b = sampler(1.0, 0, 1.0, 99);
        let sa: Vec<u32> = (0..200).map(|_| a.sample(&LOGITS).expect("sample")).collect();
        let sb: Vec<u32> = (0..200).map(|_| b.sample(&LOGITS).expect("sample")).collect();
        assert_eq!(sa, sb);
        let mut c = sampler(1.0, 0, 1.0, 100);
        let sc: Vec<u32> = (0..200).map(|_| c.sample(&LOGITS).expect("sample")).collect();
        assert_ne!(sa, sc);
    }

    #[test]
    fn greedy_is_argmax_with_lowest_tie() {
        let mut s = sampler(0.0, 0, 1.0, 1);
        assert_eq!(s.sample(&LOGITS).expect("sample"), 3);
        assert_eq!(s.sample(&[1.0, 3.0, 3.0, -2.0]).expect("sample"), 1);
        assert_eq!(s.sample(&[f32::NAN, -1.0, f32::NAN]).expect("sample"), 1);
        assert_eq!(s.sample(&[f32::NEG_INFINITY, -5.0]).expect("sample"), 1);
        // Greedy uses no randomness.
        assert_eq!(s.rng, Rng::new(1));
    }

    #[test]
    fn top_k_one_and_tiny_top_p_are_greedy() {
        for seed in 0..50 {
            let mut k1 = sampler(1.5, 1, 1.0, seed);
            let mut p0 = sampler(1.5, 0, 1e-6, seed);
            for _ in 0..20 {
                assert_eq!(k1.sample(&LOGITS).expect("sample"), 3);
                assert_eq!(p0.sample(&LOGITS).expect("sample"), 3);
            }
        }
        // Ties resolve to the lowest id here too.
        let mut k1 = sampler(1.0, 1, 1.0, 0);
        assert_eq!(k1.sample(&[0.0, 5.0, 5.0]).expect("sample"), 1);
    }

    #[test]
    fn empirical_frequencies_match_softmax() {
        let logits = [0.5f32, 1.5, -0.3, 1.0];
        let expected = softmax(&logits);
        let mut s = sampler(1.0, 0, 1.0, 2024);
        let n = 20_000;
        let mut counts = [0usize; 4];
        for _ in 0..n {
            counts[s.sample(&logits).expect("sample") as usize] += 1;
        }
        for i in 0..4 {
            let f = counts[i] as f64 / n as f64;
            assert!((f - expected[i]).abs() < 0.01, "id {i}: {f} vs {}", expected[i]);
        }
        let probs = s.probabilities(&logits).expect("probs");
        for i in 0..4 {
            assert!((probs[i] - expected[i]).abs() < 1e-12);
        }
    }

    #[test]
    fn top_k_and_top_p_frequencies() {
        let logits = [0.5f32, 1.5, -0.3, 1.0];
        // top-k 2 keeps ids 1 and 3, renormalised.
        let p = softmax(&logits);
        let z = p[1] + p[3];
        let mut s = sampler(1.0, 2, 1.0, 5);
        let mut counts = [0usize; 4];
        for _ in 0..20_000 {
            counts[s.sample(&logits).expect("sample") as usize] += 1;
        }
        assert_eq!(counts[0] + counts[2], 0);
        assert!((counts[1] as f64 / 20_000.0 - p[1] / z).abs() < 0.01);
        // top-p: p[1] ≈ 0.44, p[3] ≈ 0.27 → cumulative ≥ 0.6 needs ids {1, 3}.
        let s = sampler(1.0, 0, 0.6, 5);
        let probs = s.probabilities(&logits).expect("probs");
        assert!(probs[0] == 0.0 && probs[2] == 0.0);
        assert!((probs[1] - p[1] / z).abs() < 1e-12 && (probs[3] - p[3] / z).abs() < 1e-12);
    }

    #[test]
    fn temperature_sharpens() {
        let entropy = |p: &[f64]| -> f64 { p.iter().filter(|&&x| x > 0.0).map(|&x| -x * x.ln()).sum() };
        let mut last_max = 0.0;
        let mut last_entropy = f64::INFINITY;
        for t in [4.0f32, 2.0, 1.0, 0.5, 0.25, 0.1] {
            let probs = sampler(t, 0, 1.0, 0).probabilities(&LOGITS).expect("probs");
            let max = probs[3];
            let h = entropy(&probs);
            assert!(max > last_max && h < last_entropy, "t={t}: max {max}, entropy {h}");
            last_max = max;
            last_entropy = h;
        }
        assert!(last_max > 0.99);
    }

    #[test]
    fn invalid_configs_error() {
        let bad = [
            ("temperature", SamplingConfig { temperature: -0.1, ..Default::default() }),
            ("temperature", SamplingConfig { temperature: f32::NAN, ..Default::default() }),
            ("temperature", SamplingConfig { temperature: f32::INFINITY, ..Default::default() }),
            ("top_p", SamplingConfig { top_p: 0.0, ..Default::default() }),
            ("top_p", SamplingConfig { top_p: 1.5, ..Default::default() }),
            ("top_p", SamplingConfig { top_p: f32::NAN, ..Default::default() }),
            ("top_p", SamplingConfig { top_p: -0.5, ..Default::default() }),
        ];
        for (field, cfg) in bad {
            let err = Sampler::new(cfg).expect_err("invalid");
            assert!(matches!(err, Error::InvalidArgument { ref name, .. } if name == field), "{err}");
            assert!(err.to_string().contains(field));
        }
        assert!(SamplingConfig::default().validate().is_ok());
        let d = SamplingConfig::default();
        assert_eq!((d.temperature, d.top_k, d.top_p, d.seed), (0.8, 0, 1.0, 0));
    }

    #[test]
    fn nan_logits_never_chosen_and_degenerate_inputs() {
        let logits = [f32::NAN, 0.0, f32::NAN, 0.1, f32::NAN];
        let mut s = sampler(5.0, 0, 1.0, 3);
        for _ in 0..2000 {
            let id = s.sample(&logits).expect("sample");
            assert!(id == 1 || id == 3);
        }
        // +inf is chosen greedily (lowest id among several), and still consumes one draw.
        let mut s = sampler(1.0, 0, 1.0, 3);
        assert_eq!(s.sample(&[0.0, f32::INFINITY, 1.0, f32::INFINITY]).expect("sample"), 1);
        let mut r = Rng::new(3);
        r.next_f64();
        assert_eq!(s.rng, r);
        for bad in [&[][..], &[f32::NAN, f32::NAN], &[f32::NEG_INFINITY], &[f32::NAN, f32::NEG_INFINITY]] {
            let err = s.sample(bad).expect_err("degenerate");
            assert!(matches!(err, Error::InvalidArgument { ref name, .. } if name == "logits"));
            let mut g = sampler(0.0, 0, 1.0, 0);
            assert!(g.sample(bad).is_err());
        }
    }

    #[test]
    fn serde_round_trip() {
        let cfg = SamplingConfig { temperature: 0.7, top_k: 40, top_p: 0.9, seed: u64::MAX };
        let json = serde_json::to_string(&cfg).expect("ser");
        let back: SamplingConfig = serde_json::from_str(&json).expect("de");
        assert_eq!(back, cfg);
    }

    #[test]
    fn log_softmax_properties() {
        let ls = log_softmax(&LOGITS);
        let total: f64 = ls.iter().map(|x| x.exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // Shift invariance and no overflow for huge logits.
        let shifted: Vec<f32> = LOGITS.iter().map(|x| x + 1e4).collect();
        for (a, b) in ls.iter().zip(log_softmax(&shifted)) {
            assert!((a - b).abs() < 1e-3);
        }
        let big = log_softmax(&[1e30, 0.0]);
        assert_eq!(big[0], 0.0);
        assert_eq!(big[1], -1e30f32 as f64);
        let with_nan = log_softmax(&[f32::NAN, 0.0, 0.0]);
        assert_eq!(with_nan[0], f64::NEG_INFINITY);
        assert!((with_nan[1] - 0.5f64.ln()).abs() < 1e-15);
        let inf = log_softmax(&[f32::INFINITY, 0.0, f32::INFINITY]);
        assert_eq!(inf, vec![0.5f64.ln(), f64::NEG_INFINITY, 0.5f64.ln()]);
        assert!(log_softmax(&[f32::NEG_INFINITY, f32::NAN]).iter().all(|&x| x == f64::NEG_INFINITY));
        assert!(log_softmax(&[]).is_empty());
        let sm = softmax(&[0.0, 0.0]);
        assert_eq!(sm, vec![0.5, 0.5]);
    }

    fn logit() -> impl Strategy<Value = f32> {
        prop_oneof![
            20 => -30.0f32..30.0,
            1 => Just(f32::NAN),
            1 => Just(f32::NEG_INFINITY),
        ]
    }

    proptest! {
        #[test]
        fn sampled_id_in_range_and_allowed(
            mut logits in prop::collection::vec(logit(), 1..40),
            temperature in prop_oneof![Just(0.0f32), 0.05f32..4.0],
            top_k in 0usize..8,
            top_p in prop_oneof![Just(1.0f32), 0.01f32..1.0],
            seed in any::<u64>(),
        ) {
            // Keep at least one finite logit.
            logits[0] = if logits[0].is_finite() { logits[0] } else { 0.0 };
            let mut s = sampler(temperature, top_k, top_p, seed);
            let probs = s.probabilities(&logits).expect("probs");
            prop_assert!((probs.iter().sum::<f64>() - 1.0).abs() < 1e-9);
            for _ in 0..5 {
                let id = s.sample(&logits).expect("sample") as usize;
                prop_assert!(id < logits.len());
                prop_assert!(logits[id].is_finite());
                prop_assert!(probs[id] > 0.0, "id {} has zero probability", id);
                if temperature > 0.0 {
                    // Independent check against the plain softmax of logits / T.
                    let t = f64::from(temperature);
                    let scaled: Vec<f64> = logits
                        .iter()
                        .map(|&l| if l.is_finite() { f64::from(l) / t } else { f64::NEG_INFINITY })
                        .collect();
                    let m = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = scaled.iter().map(|&x| (x - m).exp()).collect();
                    let sum: f64 = w.iter().sum();
                    let p: Vec<f64> = w.iter().map(|&x| x / sum).collect();
                    let better: Vec<f64> = p.iter().copied().filter(|&q| q > p[id] * (1.0 + 1e-9)).collect();
                    if top_k > 0 {
                        prop_assert!(better.len() < top_k);
                    }
                    let mut kept: Vec<f64> = p.clone();
                    kept.sort_by(|a, b| b.total_cmp(a));
                    if top_k > 0 { kept.truncate(top_k); }
                    let z: f64 = kept.iter().sum();
                    let before: f64 = better.iter().sum::<f64>() / z;
                    prop_assert!(before < f64::from(top_p) + 1e-9, "mass before {} >= top_p {}", before, top_p);
                }
            }
        }
    }

    /// A limited sampler never picks an id at or above the limit, even where those logits dominate.
    #[test]
    fn a_vocabulary_limit_keeps_every_pick_below_it() {
        let cfg = SamplingConfig { temperature: 1.0, top_k: 0, top_p: 1.0, seed: 3 };
        let logits: Vec<f32> = (0..50).map(|i| if i >= 40 { 10.0 } else { 0.0 }).collect();
        let mut limited = Sampler::new(cfg).unwrap().limit_vocab(40);
        assert!((0..200).all(|_| limited.sample(&logits).unwrap() < 40));
        let mut free = Sampler::new(cfg).unwrap();
        assert!(
            (0..200).any(|_| free.sample(&logits).unwrap() >= 40),
            "the test logits favour the padded ids"
        );
        let mut greedy = Sampler::new(SamplingConfig { temperature: 0.0, ..cfg }).unwrap().limit_vocab(40);
        assert!(greedy.sample(&logits).unwrap() < 40);
    }
}
