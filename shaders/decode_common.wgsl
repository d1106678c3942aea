// Snippet (prepended by crates/gpu/src/shaders.rs to decode.wgsl and decode_linear.wgsl, after
// weights.wgsl, step.wgsl, reduce.wgsl and norm_value.wgsl): what the fused decode's block kernels
// share. Dispatches meet only through storage, so each leaves what the next needs in `fa`, at the
// offsets in `dp`:
//   word 0       the step's token id (written by the host),
//   X  [d]       the block input (workgroup 0 of a block's attention dispatch writes it),
//   X1 [d]       block input + attention + b_down (workgroup 0 of ffn_block),
//   SS [H]       each head's Σ o² (a norm over all heads' outputs is a scalar on Σ PA),
//   PA [H·K, d]  each head's share of the output projection, Wo[:, head] · o_head; in softmax
//                layers one per split-K workgroup (K = dp.splits), with
//   ML [H·K, 2]  its (max, sum) and O [H·K, dh] its output, merged by ffn_block,
//   PF [S, d]    each group of 64 FFN units' share of the down projection,
//   then the linear layers' recurrent states (S, z, ReGLA's key max),
// and the next block (or head_block) starts from X1 + Σ_s PF[s]: the projections' sums, split by
// head and by unit group, in another order than the op-by-op matmuls (parity within tolerance).
// A layer's norm gains and biases and its projection biases sit in `aux` after its bias or feature
// tables (read from offset 0 by bias() and features()); absent biases are zeros. One workgroup of
// 64 keeps the row in workgroup memory (d ≤ FUSED_MAX_D) and gives each invocation whole output
// rows of a projection. Weight matrices are words of the model's weight kind (weights.wgsl).

// `DecodeParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(2) var<uniform> dp: DecodeParams;
@group(0) @binding(3) var<storage, read_write> fa: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<f32>;
@group(0) @binding(5) var<storage, read> wqkv: array<WeightVec>;
@group(0) @binding(6) var<storage, read> wo: array<WeightVec>;
// RoPE cos/sin [pos, dh/2, 2], or in layer 0 of a model with absolute positions, their table [pos, d].
@group(0) @binding(7) var<storage, read> tab: array<f32>;
@group(0) @binding(10) var<storage, read> emb: array<WeightVec>;

const WG: u32 = 64u;
const HV: u32 = 3u * MAX_DH;

// The row (normalized in place).
var<workgroup> xs: array<f32, FUSED_MAX_D>;
// attn_block: the head's q | k | v, then its output in [0, dh); ffn_block: the 64 units' activations.
var<workgroup> hv: array<f32, HV>;

// xs ← X1 + Σ_s PF[s], the previous block's output.
fn gather_residual(lid: u32) {
    for (var c = lid; c < dp.d; c = c + WG) {
        var v = fa[dp.fa_x1 + c];
        for (var s = 0u; s < dp.slices; s = s + 1u) {
            v = v + fa[dp.fa_pf + s * dp.d + c];
        }
        xs[c] = v;
    }
    workgroupBarrier();
}

// Normalize xs in place (the statistics of norm.wgsl); gain and bias at aux[off_w..], aux[off_b..].
fn norm_row(lid: u32, kind: u32, eps: f32, off_w: u32, off_b: u32) {
    let n = f32(dp.d);
    var s = 0.0;
    var ss = 0.0;
    for (var c = lid; c < dp.d; c = c + WG) {
        s = s + xs[c];
        ss = ss + xs[c] * xs[c];
    }
    let mean = reduce_sum(lid, s) / n;
    let ms = reduce_sum(lid, ss) / n;
    var dev = 0.0;
    for (var c = lid; c < dp.d; c = c + WG) {
        dev = dev + (xs[c] - mean) * (xs[c] - mean);
    }
    let var_ = reduce_sum(lid, dev) / n;
    for (var c = lid; c < dp.d; c = c + WG) {
        xs[c] = norm_value(kind, xs[c], mean, ms, var_, eps, aux[off_w + c], aux[off_b + c]);
    }
    workgroupBarrier();
}

// acc + xs[i]·w.x + xs[i + 1]·w.y + xs[i + 2]·w.z + xs[i + 3]·w.w, added in that order (the
// element-by-element loops' order: the same bits as four steps of them).
fn dot4_xs(acc: f32, w: vec4<f32>, i: u32) -> f32 {
    return acc + xs[i] * w.x + xs[i + 1u] * w.y + xs[i + 2u] * w.z + xs[i + 3u] * w.w;
}

// The same with hv[c..c + 4).
fn dot4_hv(acc: f32, w: vec4<f32>, c: u32) -> f32 {
    return acc + hv[c] * w.x + hv[c + 1u] * w.y + hv[c + 2u] * w.z + hv[c + 3u] * w.w;
}

// Row `row` of a projection · xs, one function per weight binding: WGSL passes no storage array to a
// function (without the unrestricted_pointer_parameters extension), and one accessor over every
// binding would count them all in each entry point's layout (WebGPU allows 8 storage buffers).
fn dot_qkv(row: u32) -> f32 {
    let e0 = row * dp.d;
    var acc = 0.0;
    if (dp.d % 4u == 0u) {
        for (var i = 0u; i < dp.d; i = i + 4u) {
            acc = dot4_xs(acc, widen4(wqkv[(e0 + i) >> 2u]), i);
        }
        return acc;
    }
    for (var i = 0u; i < dp.d; i = i + 1u) {
        acc = acc + xs[i] * widen(wqkv[weight_vec(e0 + i)], e0 + i);
    }
    return acc;
}

// xs ← the block input: layer 0 the token's embedding × emb_scale (+ absolute position, + embedding norm),
// else the previous block's output; workgroup 0 keeps it in X for ffn_block's residual.
fn block_input(lid: u32, keep: bool) {
    if (dp.first != 0u) {
        let t = min(bitcast<u32>(fa[0]), dp.vocab - 1u);
        for (var c = lid; c < dp.d; c = c + WG) {
            let e = t * dp.d + c;
            var v = widen(emb[weight_vec(e)], e) * dp.emb_scale;
            if (dp.use_pe != 0u) {
                v = v + tab[st.pos0 * dp.d + c];
            }
            xs[c] = v;
        }
        workgroupBarrier();
        if (dp.emb_norm != 0u) {
            norm_row(lid, dp.emb_kind, dp.emb_eps, dp.off_emb_w, dp.off_emb_b);
        }
    } else {
        gather_residual(lid);
    }
    if (keep) {
        for (var c = lid; c < dp.d; c = c + WG) {
            fa[dp.fa_x + c] = xs[c];
        }
    }
}

// SS[head] = Σ o² over hv[0, dh) (lane 0).
fn head_sum_squares(lid: u32, hh: u32, dh: u32) {
    if (lid == 0u) {
        var ss = 0.0;
        for (var c = 0u; c < dh; c = c + 1u) {
            ss = ss + hv[c] * hv[c];
        }
        fa[dp.fa_ss + hh] = ss;
    }
}

// PA[slot] = Wo[:, head] · hv[0, dh) (slot: the head, or its split-K workgroup).
fn head_projection(lid: u32, slot: u32, hh: u32, dh: u32) {
    let vectors = dp.a % 4u == 0u && dh % 4u == 0u;
    for (var o = lid; o < dp.d; o = o + WG) {
        let e0 = o * dp.a + hh * dh;
        var s = 0.0;
        if (vectors) {
            for (var c = 0u; c < dh; c = c + 4u) {
                s = dot4_hv(s, widen4(wo[(e0 + c) >> 2u]), c);
            }
        } else {
            for (var c = 0u; c < dh; c = c + 1u) {
                s = s + widen(wo[weight_vec(e0 + c)], e0 + c) * hv[c];
            }
        }
        fa[dp.fa_pa + slot * dp.d + o] = s;
    }
}
