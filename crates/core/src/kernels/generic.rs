//! The kernels, written once over [`F32x8`] and the stored [`Format`]. Every function is
//! `#[inline(always)]`: it must be compiled inside the entry that enables the CPU features of its
//! lanes (`x86::avx2`), or the vector operations would become calls.

use super::lanes::{F32x8, Format, Shape, F32};
use super::reference;

/// Input rows multiplied by each stripe of weight rows while it is in cache ([`matmul`]): the
/// matrix is read once per block of rows instead of once per row.
const ROW_BLOCK: usize = 16;

/// Above this size (a core's L2 cache) a decode step widens the rows of a half matrix before
/// multiplying ([`matmul`]).
pub(super) const STREAMED_BYTES: usize = 1 << 20;

/// The `n / 8` full chunks of `s[..n]`, as arrays (length exactly `n / 8`, so that indexing by a
/// chunk number below it needs no check).
#[inline(always)]
fn chunks<T>(s: &[T], n: usize) -> &[[T; 8]] {
    &s[..n].as_chunks::<8>().0[..n / 8]
}

/// `out[o][r] = dot(w[o], x[r])` over `n` values, in the reference order: each weight chunk is
/// loaded (and widened) once and used for `R` input rows, each input chunk for `O` weight rows.
/// At most eight outputs (`R·O ≤ 8`), one accumulator register (or pair) each; output `(o, r)` is
/// at index `o·R + r`. Half values must be finite (see [`F32x8::load_f16_finite`]).
#[inline(always)]
pub(super) fn tile<V: F32x8, W: Format, const R: usize, const O: usize>(
    w: [&[W::Elem]; O],
    x: [&[f32]; R],
    n: usize,
) -> [f32; 8] {
    // Plain loops, not `array::map`: the arrays must dissolve into registers, which needs every
    // call inlined (and the lengths then known, so that indexing below needs no checks).
    let mut wc: [&[[W::Elem; 8]]; O] = [&[]; O];
    let mut xc: [&[[f32; 8]]; R] = [&[]; R];
    for o in 0..O {
        wc[o] = chunks(w[o], n);
    }
    for r in 0..R {
        xc[r] = chunks(x[r], n);
    }
    let mut acc = [[V::zero(); R]; O];
    for c in 0..n / 8 {
        let mut xv = [V::zero(); R];
        for r in 0..R {
            xv[r] = V::load(&xc[r][c]);
        }
        for o in 0..O {
            let wv = W::load_finite::<V>(&wc[o][c]);
            for r in 0..R {
                acc[o][r] = acc[o][r].add(wv.mul(xv[r]));
            }
        }
    }
    // The scalar sums of the last `n mod 8` products (zero where there are none).
    let full = n / 8 * 8;
    let mut tails = [0.0f32; 8];
    if full < n {
        for (i, t) in tails.iter_mut().enumerate().take(R * O) {
            let (wi, xi) = (&w[i / R][full..n], &x[i % R][full..n]);
            *t = wi.iter().zip(xi).fold(0.0f32, |t, (&a, &b)| t + W::widen(a) * b);
        }
    }
    // The reference reduction of all R·O accumulators at once, then `+ tail`.
    let mut flat = [V::zero(); 8];
    for (i, f) in flat.iter_mut().enumerate().take(R * O) {
        *f = acc[i / R][i % R];
    }
    let mut sums = [0.0f32; 8];
    if R * O > 4 {
        V::sum8(flat).add(V::load(&tails)).store(&mut sums);
    } else {
        let s4 = V::sum4([flat[0], flat[1], flat[2], flat[3]]);
        for i in 0..4 {
            sums[i] = s4[i] + tails[i];
        }
    }
    sums
}

/// `Σ a[i]·b[i]`.
#[inline(always)]
pub(super) fn dot<V: F32x8>(a: &[f32], b: &[f32]) -> f32 {
    tile::<V, F32, 1, 1>([a], [b], a.len().min(b.len()))[0]
}

/// `Y = X·Wᵀ`: `y[r·out + o] = dot(W[o], x[r])`, `W` row-major with rows of `n` values.
#[inline(always)]
pub(super) fn matmul<V: F32x8, W: Format>(w: &[W::Elem], n: usize, x: &[f32], y: &mut [f32]) {
    if x.len() / n == 1 {
        matvec::<V, W>(w, n, x, y);
        return;
    }
    // Prefill: each stripe of two weight rows is widened once per block of input rows (widened
    // inside the tiles, half values would be widened again for every tile of input rows).
    let (rows, out) = (x.len() / n, w.len() / n);
    let mut scratch = Vec::new();
    for r0 in (0..rows).step_by(ROW_BLOCK) {
        let r1 = (r0 + ROW_BLOCK).min(rows);
        let mut o = 0;
        while V::SHAPE != Shape::Single && o + 2 <= out {
            let ws = as_f32::<V, W>(&w[o * n..(o + 2) * n], &mut scratch);
            if V::SHAPE == Shape::Wide {
                stripe::<V, F32, 4, 2>(ws, n, o, x, r0..r1, y, out);
            } else {
                stripe::<V, F32, 2, 2>(ws, n, o, x, r0..r1, y, out);
            }
            o += 2;
        }
        for o in o..out {
            let ws = as_f32::<V, W>(&w[o * n..(o + 1) * n], &mut scratch);
            stripe::<V, F32, 1, 1>(ws, n, o, x, r0..r1, y, out);
        }
    }
}

/// [`matmul`] of one input row (a decode step): four weight rows at a time (four independent
/// sums), read as stored, or, from a half matrix too large to stay in cache, widened first: a
/// plain streaming pass keeps more loads in flight (docs/bench.md: 9.7 → 15.7 GB/s from memory,
/// but 2× slower in cache).
#[inline(always)]
fn matvec<V: F32x8, W: Format>(w: &[W::Elem], n: usize, x: &[f32], y: &mut [f32]) {
    let out = w.len() / n;
    if V::SHAPE == Shape::Single {
        // Plain code: the reference loop, half values widened by table.
        for (yo, wo) in y.iter_mut().zip(w.chunks_exact(n)) {
            *yo = reference::dot_by(wo, x, W::widener());
        }
        return;
    }
    let streamed = std::mem::size_of_val(w) > STREAMED_BYTES;
    let (mut o, mut scratch) = (0, Vec::new());
    while o + 4 <= out {
        let ws = &w[o * n..(o + 4) * n];
        match W::as_f32(ws) {
            None if streamed => {
                let ws = as_f32::<V, W>(ws, &mut scratch);
                stripe::<V, F32, 1, 4>(ws, n, o, x, 0..1, y, out);
            }
            _ => stripe::<V, W, 1, 4>(ws, n, o, x, 0..1, y, out),
        }
        o += 4;
    }
    for o in o..out {
        stripe::<V, W, 1, 1>(&w[o * n..(o + 1) * n], n, o, x, 0..1, y, out);
    }
}

/// `s` as f32: itself when it is, else widened into `scratch`.
#[inline(always)]
fn as_f32<'a, V: F32x8, W: Format>(s: &'a [W::Elem], scratch: &'a mut Vec<f32>) -> &'a [f32] {
    if let Some(f) = W::as_f32(s) {
        return f;
    }
    scratch.resize(s.len(), 0.0);
    widen::<V, W>(s, scratch);
    scratch
}

/// Outputs `o0 .. o0 + O` (the weight rows `w`, `O·n` values) of the input rows `rows`: tiles of
/// `R` rows, then one row at a time.
#[inline(always)]
fn stripe<V: F32x8, W: Format, const R: usize, const O: usize>(
    w: &[W::Elem],
    n: usize,
    o0: usize,
    x: &[f32],
    rows: std::ops::Range<usize>,
    y: &mut [f32],
    out: usize,
) {
    let mut wr: [&[W::Elem]; O] = [&[]; O];
    for (i, wi) in wr.iter_mut().enumerate() {
        *wi = &w[i * n..(i + 1) * n];
    }
    let xr = |r: usize| &x[r * n..(r + 1) * n];
    let mut r = rows.start;
    while r + R <= rows.end {
        let mut xs: [&[f32]; R] = [&[]; R];
        for (i, xi) in xs.iter_mut().enumerate() {
            *xi = xr(r + i);
        }
        let t = tile::<V, W, R, O>(wr, xs, n);
        for k in 0..R {
            for i in 0..O {
                y[(r + k) * out + o0 + i] = t[i * R + k];
            }
        }
        r += R;
    }
    for r in r..rows.end {
        let t = tile::<V, W, 1, O>(wr, [xr(r)], n);
        y[r * out + o0..r * out + o0 + O].copy_from_slice(&t[..O]);
    }
}

/// `out[j] = dot(q, m[j·stride ..][.. q.len()])`, eight or four rows at a time.
#[inline(always)]
pub(super) fn dot_rows<V: F32x8>(q: &[f32], m: &[f32], stride: usize, out: &mut [f32]) {
    let n = q.len();
    let row = |j: usize| &m[j * stride..j * stride + n];
    let mut j = 0;
    while V::SHAPE == Shape::Wide && j + 8 <= out.len() {
        let mut rows: [&[f32]; 8] = [&[]; 8];
        for (i, ri) in rows.iter_mut().enumerate() {
            *ri = row(j + i);
        }
        out[j..j + 8].copy_from_slice(&tile::<V, F32, 1, 8>(rows, [q], n));
        j += 8;
    }
    while V::SHAPE != Shape::Single && j + 4 <= out.len() {
        let t = tile::<V, F32, 1, 4>([row(j), row(j + 1), row(j + 2), row(j + 3)], [q], n);
        out[j..j + 4].copy_from_slice(&t[..4]);
        j += 4;
    }
    for (j, o) in out.iter_mut().enumerate().skip(j) {
        *o = tile::<V, F32, 1, 1>([row(j)], [q], n)[0];
    }
}

/// `y += Σ_j p[j]·m[j·stride ..][.. y.len()]` in order of `j`, zero weights skipped: up to 32
/// values of `y` stay in registers while the rows stream by.
#[inline(always)]
pub(super) fn weighted_rows<V: F32x8>(p: &[f32], m: &[f32], stride: usize, y: &mut [f32]) {
    let n = y.len();
    let full = n / 8 * 8;
    let mut c = 0;
    while V::SHAPE != Shape::Single && c + 32 <= full {
        weighted_chunks::<V, 4>(p, m, stride, c, &mut y[c..c + 32]);
        c += 32;
    }
    while c < full {
        weighted_chunks::<V, 1>(p, m, stride, c, &mut y[c..c + 8]);
        c += 8;
    }
    weighted_tail(p, m, stride, full, y);
}

/// Columns `full..` of [`weighted_rows`] (fewer than eight), scalar, zero weights skipped.
#[inline(always)]
fn weighted_tail(p: &[f32], m: &[f32], stride: usize, full: usize, y: &mut [f32]) {
    let n = y.len();
    if full == n {
        return;
    }
    for (j, &pj) in p.iter().enumerate().filter(|(_, p)| **p != 0.0) {
        let row = &m[j * stride + full..j * stride + n];
        y[full..].iter_mut().zip(row).for_each(|(yi, mi)| *yi += pj * mi);
    }
}

/// [`weighted_rows`] of the `K` chunks of eight values at column `c`.
#[inline(always)]
fn weighted_chunks<V: F32x8, const K: usize>(p: &[f32], m: &[f32], stride: usize, c: usize, y: &mut [f32]) {
    let yc = chunks(y, 8 * K);
    let mut acc = [V::zero(); K];
    for k in 0..K {
        acc[k] = V::load(&yc[k]);
    }
    for (j, &pj) in p.iter().enumerate() {
        if pj == 0.0 {
            continue;
        }
        let (s, mc) = (V::splat(pj), chunks(&m[j * stride + c..], 8 * K));
        for k in 0..K {
            acc[k] = acc[k].add(s.mul(V::load(&mc[k])));
        }
    }
    let yc = y.as_chunks_mut::<8>().0;
    for k in 0..K {
        acc[k].store(&mut yc[k]);
    }
}

/// `y += a·x`.
#[inline(always)]
pub(super) fn axpy<V: F32x8>(a: f32, x: &[f32], y: &mut [f32]) {
    let n = x.len().min(y.len());
    let s = V::splat(a);
    let (yc, yt) = y[..n].as_chunks_mut::<8>();
    let (xc, xt) = x[..n].as_chunks::<8>();
    for (yi, xi) in yc.iter_mut().zip(xc) {
        V::load(yi).add(s.mul(V::load(xi))).store(yi);
    }
    yt.iter_mut().zip(xt).for_each(|(yi, xi)| *yi += a * xi);
}

/// `out = src` widened to f32.
#[inline(always)]
pub(super) fn widen<V: F32x8, W: Format>(src: &[W::Elem], out: &mut [f32]) {
    let n = src.len().min(out.len());
    let (oc, ot) = out[..n].as_chunks_mut::<8>();
    let (sc, st) = src[..n].as_chunks::<8>();
    for (o, s) in oc.iter_mut().zip(sc) {
        W::load::<V>(s).store(o);
    }
    ot.iter_mut().zip(st).for_each(|(o, &s)| *o = W::widen(s));
}

/// [`reference::exp`] on eight lanes, the same operations in the same order.
#[inline(always)]
pub(super) fn exp<V: F32x8>(x: V) -> V {
    use reference::{EXP_HI, EXP_LO, EXP_POLY, LN2_HI, LN2_LO_NEG, LOG2E, ROUND};
    let xc = x.max(V::splat(EXP_LO)).min(V::splat(EXP_HI));
    let n = xc.mul(V::splat(LOG2E)).add(V::splat(ROUND)).sub(V::splat(ROUND));
    let r = xc.sub(n.mul(V::splat(LN2_HI))).sub(n.mul(V::splat(LN2_LO_NEG)));
    let z = r.mul(r);
    let mut p = V::splat(EXP_POLY[0]);
    for &c in &EXP_POLY[1..] {
        p = p.mul(r).add(V::splat(c));
    }
    let y = p.mul(z).add(r).add(V::splat(1.0));
    y.mul(n.pow2i()).zero_below(x, EXP_LO)
}

/// [`reference::softmax`]: the maximum over eight lanes (exact in any order), the exponentials and
/// their eight partial sums in one pass, the scale in another.
#[inline(always)]
pub(super) fn softmax<V: F32x8>(x: &mut [f32]) {
    let n = x.len();
    let full = n / 8 * 8;
    let (body, tail) = x.split_at_mut(full);
    let (body, _) = body.as_chunks_mut::<8>();
    let mut mv = V::splat(f32::MIN);
    for c in body.iter() {
        mv = mv.max(V::load(c));
    }
    let mut lanes = [0.0f32; 8];
    mv.store(&mut lanes);
    let m = lanes.iter().chain(tail.iter()).fold(f32::MIN, |m, &v| if v > m { v } else { m });
    let (mv, mut acc) = (V::splat(m), V::zero());
    for c in body.iter_mut() {
        let e = exp(V::load(c).sub(mv));
        acc = acc.add(e);
        e.store(c);
    }
    let mut t = 0.0f32;
    for v in tail.iter_mut() {
        *v = reference::exp(*v - m);
        t += *v;
    }
    let s = V::sum4([acc, V::zero(), V::zero(), V::zero()])[0] + t;
    let inv = if s > 0.0 { 1.0 / s } else { 0.0 };
    for c in body.iter_mut() {
        V::load(c).mul(V::splat(inv)).store(c);
    }
    tail.iter_mut().for_each(|v| *v *= inv);
}

/// [`reference::silu_mul`] on eight lanes (`−g` as `0 − g`: the same exponential, even at ±0).
#[inline(always)]
pub(super) fn silu_mul<V: F32x8>(u: &mut [f32], g: &[f32]) {
    let n = u.len().min(g.len());
    let (uc, ut) = u[..n].as_chunks_mut::<8>();
    let (gc, gt) = g[..n].as_chunks::<8>();
    let one = V::splat(1.0);
    for (uc, gc) in uc.iter_mut().zip(gc) {
        let g = V::load(gc);
        let s = g.div(one.add(exp(V::zero().sub(g))));
        V::load(uc).mul(s).store(uc);
    }
    reference::silu_mul(ut, gt);
}

/// [`reference::dot_rows_block`]: register tiles of query rows × key rows (4 × 2 on wide lanes,
/// 2 × 2 on narrow ones), so each key row loaded serves several queries; a last single query runs
/// as [`dot_rows`]. Each output is `tile`'s dot product: the reference's bits.
#[inline(always)]
pub(super) fn dot_rows_block<V: F32x8>(
    q: &[f32],
    q_stride: usize,
    dh: usize,
    m: &[f32],
    stride: usize,
    n: usize,
    out: &mut [f32],
) {
    let rows = out.len().checked_div(n).unwrap_or(0);
    let qrow = |b: usize| &q[b * q_stride..b * q_stride + dh];
    let krow = |j: usize| &m[j * stride..j * stride + dh];
    let mut b = 0;
    while V::SHAPE == Shape::Wide && b + 4 <= rows {
        let xs = [qrow(b), qrow(b + 1), qrow(b + 2), qrow(b + 3)];
        key_pairs::<V, 4>(xs, &krow, n, dh, &mut out[b * n..(b + 4) * n]);
        b += 4;
    }
    while V::SHAPE != Shape::Single && b + 2 <= rows {
        key_pairs::<V, 2>([qrow(b), qrow(b + 1)], &krow, n, dh, &mut out[b * n..(b + 2) * n]);
        b += 2;
    }
    for b in b..rows {
        dot_rows::<V>(qrow(b), m, stride, &mut out[b * n..(b + 1) * n]);
    }
}

/// `out[k·n + j] = dot(xs[k], krow(j))` for `j < n`, two keys per tile.
#[inline(always)]
fn key_pairs<'a, V: F32x8, const R: usize>(
    xs: [&[f32]; R],
    krow: &impl Fn(usize) -> &'a [f32],
    n: usize,
    dh: usize,
    out: &mut [f32],
) {
    let mut j = 0;
    while j + 2 <= n {
        let t = tile::<V, F32, R, 2>([krow(j), krow(j + 1)], xs, dh);
        for k in 0..R {
            out[k * n + j] = t[k];
            out[k * n + j + 1] = t[R + k];
        }
        j += 2;
    }
    if j < n {
        let t = tile::<V, F32, R, 1>([krow(j)], xs, dh);
        for k in 0..R {
            out[k * n + j] = t[k];
        }
    }
}

/// [`reference::weighted_rows_block`]: groups of weight rows (4 on wide lanes, 2 on narrow ones)
/// share each loaded value row; each output adds its terms in order of `j` as [`weighted_rows`]
/// does. A key whose weights are all zero is skipped; one that is zero for some rows only adds
/// `0·m_j` to them, which changes nothing where `y` holds no −0 and `m` is finite (attention
/// outputs start at +0 and a sum of finite terms never becomes −0), so the results are the
/// reference's bits there.
#[inline(always)]
pub(super) fn weighted_rows_block<V: F32x8>(
    p: &[f32],
    n: usize,
    m: &[f32],
    stride: usize,
    y: &mut [f32],
    y_stride: usize,
    dh: usize,
) {
    let rows = p.len().checked_div(n).unwrap_or(0);
    let mut b = 0;
    while V::SHAPE == Shape::Wide && b + 4 <= rows {
        weighted_group::<V, 4>(&p[b * n..(b + 4) * n], n, m, stride, &mut y[b * y_stride..], y_stride, dh);
        b += 4;
    }
    while V::SHAPE != Shape::Single && b + 2 <= rows {
        weighted_group::<V, 2>(&p[b * n..(b + 2) * n], n, m, stride, &mut y[b * y_stride..], y_stride, dh);
        b += 2;
    }
    for b in b..rows {
        weighted_rows::<V>(&p[b * n..(b + 1) * n], m, stride, &mut y[b * y_stride..b * y_stride + dh]);
    }
}

/// [`weighted_rows_block`] of `R` rows: sixteen columns at a time, then eight, then the scalar
/// tail row by row.
#[inline(always)]
fn weighted_group<V: F32x8, const R: usize>(
    p: &[f32],
    n: usize,
    m: &[f32],
    stride: usize,
    y: &mut [f32],
    y_stride: usize,
    dh: usize,
) {
    let full = dh / 8 * 8;
    let mut c = 0;
    while c + 16 <= full {
        weighted_group_chunks::<V, R, 2>(p, n, m, stride, c, y, y_stride);
        c += 16;
    }
    while c < full {
        weighted_group_chunks::<V, R, 1>(p, n, m, stride, c, y, y_stride);
        c += 8;
    }
    for b in 0..R {
        weighted_tail(&p[b * n..(b + 1) * n], m, stride, full, &mut y[b * y_stride..b * y_stride + dh]);
    }
}

/// The `K` chunks of eight columns at `c` of `R` rows of [`weighted_rows_block`], in registers.
#[inline(always)]
fn weighted_group_chunks<V: F32x8, const R: usize, const K: usize>(
    p: &[f32],
    n: usize,
    m: &[f32],
    stride: usize,
    c: usize,
    y: &mut [f32],
    y_stride: usize,
) {
    let mut acc = [[V::zero(); K]; R];
    for b in 0..R {
        let yc = chunks(&y[b * y_stride + c..], 8 * K);
        for k in 0..K {
            acc[b][k] = V::load(&yc[k]);
        }
    }
    for j in 0..n {
        let mut pj = [0.0f32; R];
        for b in 0..R {
            pj[b] = p[b * n + j];
        }
        if pj.iter().all(|&v| v == 0.0) {
            continue;
        }
        let mc = chunks(&m[j * stride + c..], 8 * K);
        let mut v = [V::zero(); K];
        for k in 0..K {
            v[k] = V::load(&mc[k]);
        }
        for b in 0..R {
            let s = V::splat(pj[b]);
            for k in 0..K {
                acc[b][k] = acc[b][k].add(s.mul(v[k]));
            }
        }
    }
    for b in 0..R {
        let yc = y[b * y_stride + c..].as_chunks_mut::<8>().0;
        for k in 0..K {
            acc[b][k].store(&mut yc[k]);
        }
    }
}
