// Snippet (prepended by crates/gpu/src/shaders.rs to norm.wgsl and decode.wgsl): one normalized
// value of a row from its statistics (mean, mean square `ms`, two-pass variance `var_`): NORM_RMS
// with gain `g` (eps inside the root), NORM_LAYER with gain and bias `b`, NORM_SIMPLE_RMS
// x / (rms + eps) (no gain).

fn norm_value(kind: u32, v: f32, mean: f32, ms: f32, var_: f32, eps: f32, g: f32, b: f32) -> f32 {
    if (kind == NORM_RMS) {
        return v * inverseSqrt(ms + eps) * g;
    }
    if (kind == NORM_LAYER) {
        return (v - mean) * inverseSqrt(var_ + eps) * g + b;
    }
    return v / (sqrt(ms) + eps);
}
