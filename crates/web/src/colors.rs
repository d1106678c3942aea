//! Colormaps of the heatmaps: sequential (viridis) for probabilities, diverging (blue–white–red) for
//! logits, biases and signed linear scores, and one distinct colour for masked (future) cells.
//! Pure functions, tested natively.

/// Masked cells (keys a query cannot see): a neutral grey that neither map uses.
pub const MASKED: [u8; 3] = [0x9a, 0x9a, 0xa0];

/// Viridis sampled at 9 evenly spaced points (matplotlib's values), interpolated linearly.
const VIRIDIS: [[f32; 3]; 9] = [
    [68.0, 1.0, 84.0],
    [71.0, 44.0, 122.0],
    [59.0, 81.0, 139.0],
    [44.0, 113.0, 142.0],
    [33.0, 144.0, 141.0],
    [39.0, 173.0, 129.0],
    [92.0, 200.0, 99.0],
    [170.0, 220.0, 50.0],
    [253.0, 231.0, 37.0],
];

/// ColorBrewer RdBu (reversed: negative = blue, positive = red), 9 classes.
const DIVERGING: [[f32; 3]; 9] = [
    [33.0, 102.0, 172.0],
    [67.0, 147.0, 195.0],
    [146.0, 197.0, 222.0],
    [209.0, 229.0, 240.0],
    [247.0, 247.0, 247.0],
    [253.0, 219.0, 199.0],
    [244.0, 165.0, 130.0],
    [214.0, 96.0, 77.0],
    [178.0, 24.0, 43.0],
];

fn sample(table: &[[f32; 3]; 9], t: f32) -> [u8; 3] {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let x = t * 8.0;
    let i = (x.floor() as usize).min(7);
    let f = x - i as f32;
    let (a, b) = (table[i], table[i + 1]);
    [0, 1, 2].map(|c| (a[c] + (b[c] - a[c]) * f).round() as u8)
}

/// Sequential colour of `t` in [0, 1] (clamped; NaN → the low end).
pub fn viridis(t: f32) -> [u8; 3] {
    sample(&VIRIDIS, t)
}

/// Diverging colour of `t` in [−1, 1] (0 = white; clamped).
pub fn diverging(t: f32) -> [u8; 3] {
    sample(&DIVERGING, if t.is_finite() { 0.5 + 0.5 * t } else { 0.5 })
}

/// How values map to colours: `[lo, hi]` for sequential, `±max_abs` for diverging.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    pub signed: bool,
    pub lo: f32,
    pub hi: f32,
}

impl Scale {
    /// Fit to the finite values of `values` (masked cells excluded by the caller).
    pub fn fit(values: impl Iterator<Item = f32>, signed: bool) -> Scale {
        let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if lo > hi {
            (lo, hi) = (0.0, 1.0);
        }
        if signed {
            let m = lo.abs().max(hi.abs()).max(1e-12);
            Scale { signed, lo: -m, hi: m }
        } else {
            if hi - lo < 1e-12 {
                hi = lo + 1.0;
            }
            Scale { signed, lo, hi }
        }
    }

    /// Colour of `v` under this scale.
    pub fn color(&self, v: f32) -> [u8; 3] {
        if self.signed {
            diverging(v / self.hi.max(1e-12))
        } else {
            viridis((v - self.lo) / (self.hi - self.lo).max(1e-12))
        }
    }

    /// Nine colorbar stops `(t in [0, 1], colour)`, low to high.
    pub fn stops(&self) -> Vec<(f32, [u8; 3])> {
        (0..=8)
            .map(|k| {
                let t = k as f32 / 8.0;
                (t, if self.signed { diverging(2.0 * t - 1.0) } else { viridis(t) })
            })
            .collect()
    }

    /// CSS `linear-gradient` stops for the colorbar, low to high.
    pub fn css_gradient(&self) -> String {
        let stops: Vec<String> =
            self.stops().iter().map(|(t, [r, g, b])| format!("rgb({r},{g},{b}) {:.1}%", t * 100.0)).collect();
        format!("linear-gradient(to right, {})", stops.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_and_middle_are_the_table_values() {
        assert_eq!(viridis(0.0), [68, 1, 84]);
        assert_eq!(viridis(1.0), [253, 231, 37]);
        assert_eq!(diverging(0.0), [247, 247, 247]);
        assert_eq!(diverging(-1.0), [33, 102, 172]);
        assert_eq!(diverging(1.0), [178, 24, 43]);
        assert_eq!(viridis(f32::NAN), viridis(0.0));
        assert_eq!(viridis(7.0), viridis(1.0));
    }

    #[test]
    fn viridis_gets_brighter() {
        let lum = |c: [u8; 3]| 0.3 * c[0] as f32 + 0.59 * c[1] as f32 + 0.11 * c[2] as f32;
        let l: Vec<f32> = (0..=20).map(|k| lum(viridis(k as f32 / 20.0))).collect();
        assert!(l.windows(2).all(|w| w[1] >= w[0] - 1.0), "{l:?}");
    }

    #[test]
    fn scales_fit_the_data() {
        let s = Scale::fit([-3.0, 1.0, f32::NAN].into_iter(), true);
        assert_eq!((s.lo, s.hi), (-3.0, 3.0));
        assert_eq!(s.color(0.0), [247, 247, 247]);
        let p = Scale::fit([0.25, 0.25].into_iter(), false);
        assert!(p.hi > p.lo);
        assert!(!MASKED.iter().zip(viridis(0.5)).all(|(a, b)| *a == b));
        assert!(p.css_gradient().starts_with("linear-gradient(to right, rgb(68,1,84) 0.0%"));
    }
}
