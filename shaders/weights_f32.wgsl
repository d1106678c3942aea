// Snippet (before weights.wgsl, for f32 matrices): four f32 values per 16-byte vector.

alias WeightVec = vec4<u32>;

fn widen4(v: WeightVec) -> vec4<f32> {
    return bitcast<vec4<f32>>(v);
}
