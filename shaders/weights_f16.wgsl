// Snippet (crates/gpu/src/shaders.rs puts it in place of weights.wgsl, after `enable f16;`, where
// the adapter has shader-f16 and the matrices are f16): the matrices are bound as arrays of f16
// pairs and widened by the hardware's conversion (exact: every f16 value is an f32 value). The math
// stays f32. The same names as weights.wgsl, so the shaders that read weights compile with either.

override WEIGHT_KIND: u32 = WEIGHT_F16;

alias WeightWord = vec2<f16>;

fn weight_word(i: u32) -> u32 {
    return i >> 1u;
}

fn widen(word: WeightWord, i: u32) -> f32 {
    return f32(word[i & 1u]);
}
