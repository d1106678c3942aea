// Snippet (before weights.wgsl, after `enable f16;`, for f16 matrices on an adapter with
// shader-f16): four f16 values per 8-byte vector, widened by the hardware's conversion.

alias WeightVec = vec4<f16>;

fn widen4(v: WeightVec) -> vec4<f32> {
    return vec4<f32>(v);
}
