// Snippet shared by train.wgsl and train_gated.wgsl (prepended by crates/gpu/src/shaders.rs): the
// trainer's parameter block `tp` and generic buffers — every kernel binds a subset and its comment
// says what they hold — and the index helpers. Rows are `rows = B·t` positions of a batch (row r at
// position r mod t of sequence r / t); token buffers are [B·t, a] with head hh's channels at hh·dh;
// score rows are row = (b·h + hh)·t + i of [B·h, t, t].

// `TrainParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> tp: TrainParams;
@group(0) @binding(1) var<storage, read> src0: array<f32>;
@group(0) @binding(2) var<storage, read> src1: array<f32>;
@group(0) @binding(3) var<storage, read> src2: array<f32>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;
@group(0) @binding(5) var<storage, read_write> dst0: array<f32>;
@group(0) @binding(6) var<storage, read_write> dst1: array<f32>;
@group(0) @binding(7) var<storage, read_write> dst2: array<f32>;

// The flat index of an invocation of a 64-wide kernel on a 2-D grid (the host folds large
// counts into y), and the flat index of a workgroup.
fn flat(wg: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wg.y * nwg.x + wg.x) * 64u + lid;
}

fn group(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.y * nwg.x + wg.x;
}

// First word of position i's head in a [B·t, a] buffer, for score row `row`.
fn head_at(row: u32, i: u32) -> u32 {
    let hh = (row / tp.t) % tp.h;
    let b = row / (tp.t * tp.h);
    return (b * tp.t + i) * tp.a + hh * tp.dh;
}

fn log_sigmoid(x: f32) -> f32 {
    return min(x, 0.0) - log(1.0 + exp(-abs(x)));
}

fn sigmoid(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}
