// Snippet (prepended by crates/gpu/src/shaders.rs after the prelude to the shaders that read weight
// matrices: matmul.wgsl, embed.wgsl, decode*.wgsl), after the snippet that says how a matrix is
// bound: an array of `WeightVec`, four consecutive elements each (element i in vector i / 4), as
// the checkpoint held them: weights_f32.wgsl (f32 values, 16-byte vectors), weights_half.wgsl
// (f16 or bf16 values two to a u32 word, 8-byte vectors, widened by integer operations: exact, and
// needing no shader capability) or, where the adapter has shader-f16, weights_f16.wgsl (f16
// values widened by the hardware). Each defines `widen4`: a vector's four values as f32. Matrix
// buffers are zero-padded to whole 16-byte units. The math is f32. Rows whose elements start at a
// multiple of four are read a vector (one load) at a time; others element by element (`widen`).

// How the matrix values are stored (a params::WeightKind).
override WEIGHT_KIND: u32 = WEIGHT_F32;

// The vector holding element i.
fn weight_vec(i: u32) -> u32 {
    return i >> 2u;
}

// Element i from its vector (exact: every f16 and bf16 value is an f32 value).
fn widen(v: WeightVec, i: u32) -> f32 {
    return widen4(v)[i & 3u];
}

// IEEE binary16 bits → f32: normal numbers rebias the exponent (15 → 127), subnormals are
// mantissa · 2⁻²⁴, infinities and NaNs keep their mantissa.
fn f16_bits_to_f32(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0u) {
        return bitcast<f32>(sign | bitcast<u32>(f32(m) * 5.9604645e-8));
    }
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}
