// Snippet (before weights.wgsl, for f16 and bf16 matrices without shader-f16): four halves per
// 8-byte vector, two to a u32 word (the even element in the low half), widened with integer
// operations; WEIGHT_KIND says f16 or bf16.

alias WeightVec = vec2<u32>;

fn widen4(v: WeightVec) -> vec4<f32> {
    return vec4<f32>(widen_half(v.x & 0xffffu), widen_half(v.x >> 16u), widen_half(v.y & 0xffffu), widen_half(v.y >> 16u));
}

// One half's 16 bits as f32 (bf16 is the upper half of an f32).
fn widen_half(h: u32) -> f32 {
    if (WEIGHT_KIND == WEIGHT_F16) {
        return f16_bits_to_f32(h);
    }
    return bitcast<f32>(h << 16u);
}
