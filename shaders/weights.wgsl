// Snippet (prepended by crates/gpu/src/shaders.rs after the prelude to the shaders that read weight
// matrices: matmul.wgsl, embed.wgsl, decode.wgsl): a matrix is bound as `array<u32>` words holding
// f32 values, or two f16 or bf16 values (element i in the low half of word i / 2 when i is even),
// as its checkpoint held them; WEIGHT_KIND (a params::WeightKind) says which. The math is f32. Halves
// are widened with integer operations (exact, and needing no shader capability: naga asks for
// SHADER_FLOAT16_IN_FLOAT32 before it accepts unpack2x16float). Where the adapter has shader-f16,
// f16 matrices are read through weights_f16.wgsl instead (the same functions over f16 pairs).

override WEIGHT_KIND: u32 = WEIGHT_F32;

// What a weight binding is an array of.
alias WeightWord = u32;

// The word holding element i.
fn weight_word(i: u32) -> u32 {
    if (WEIGHT_KIND == WEIGHT_F32) {
        return i;
    }
    return i >> 1u;
}

// Element i from its word (exact: every f16 and bf16 value is an f32 value).
fn widen(word: WeightWord, i: u32) -> f32 {
    if (WEIGHT_KIND == WEIGHT_F32) {
        return bitcast<f32>(word);
    }
    var h = word >> 16u;
    if ((i & 1u) == 0u) {
        h = word & 0xffffu;
    }
    if (WEIGHT_KIND == WEIGHT_F16) {
        return f16_bits_to_f32(h);
    }
    // bf16 is the upper half of an f32.
    return bitcast<f32>(h << 16u);
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
