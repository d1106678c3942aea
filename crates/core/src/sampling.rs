//! TEMPORARY stub (replaced by the sampling helper's module).
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
pub fn log_softmax(l: &[f32]) -> Vec<f64> {
    let m = l.iter().fold(f32::MIN, |a, b| a.max(*b)) as f64;
    let s: f64 = l.iter().map(|x| (*x as f64 - m).exp()).sum();
    l.iter().map(|x| *x as f64 - m - s.ln()).collect()
}
