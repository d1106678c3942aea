// The trainer's matrix product (crates/gpu/src/train): for every batch index z = z1·nh + z2,
//   C_z(i, j) (+)= alpha · Σ_k A_z(i, k) · B_z(k, j),   i < m, j < n,
// each operand addressed by strides, so one kernel serves x·Wᵀ, dY·W, dYᵀ·X, the per-head scores
// q·kᵀ, P·v and their transposes without copies:
//   A_z(i, k) = a[a_off + z1·a_s1 + z2·a_s2 + i·a_rs + k·a_cs]   (B and C alike).
// A workgroup computes a 64 × 64 tile of C; each invocation a 4 × 4 block in registers (rows
// ty + 16·r, columns tx + 16·c), over 16-deep K tiles of A and B staged in workgroup memory, like
// matmul.wgsl's forward tile.

// `GemmParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: GemmParams;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

const GT: u32 = 64u;
const GK: u32 = 16u;

// Staged tiles, k-major: at[k·GT + row], bt[k·GT + column].
var<workgroup> at: array<f32, 1024>;
var<workgroup> bt: array<f32, 1024>;

@compute @workgroup_size(16, 16)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    let z1 = wg.z / p.nh;
    let z2 = wg.z % p.nh;
    let a0 = p.a_off + z1 * p.a_s1 + z2 * p.a_s2;
    let b0 = p.b_off + z1 * p.b_s1 + z2 * p.b_s2;
    let i0 = wg.y * GT;
    let j0 = wg.x * GT;
    // The 4 × 4 block lives in four vec4 rows with constant component indices, not in an array
    // indexed by loop counters: with naga's loop bounding (wgpu ≥ 25, gfx-rs/wgpu#7698) a driver
    // may not unroll such loops and then keeps the array in local memory.
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
    let m = p.m;
    let n = p.n;
    let kk = p.k;
    let a_rs = p.a_rs;
    let a_cs = p.a_cs;
    let b_rs = p.b_rs;
    let b_cs = p.b_cs;
    for (var k0 = 0u; k0 < kk; k0 = k0 + GK) {
        // 256 invocations stage 64 × 16 values of each operand, four each: A along k (row t,
        // depth idx % 16), B along its columns (depth idx / 64, column idx % 64).
        for (var q = 0u; q < 4u; q = q + 1u) {
            let idx = li + 256u * q;
            let t = idx / GK;
            let ka = k0 + idx % GK;
            var av = 0.0;
            if (i0 + t < m && ka < kk) {
                av = a[a0 + (i0 + t) * a_rs + ka * a_cs];
            }
            at[(idx % GK) * GT + t] = av;
            let kb = k0 + idx / GT;
            let col = idx % GT;
            var bv = 0.0;
            if (j0 + col < n && kb < kk) {
                bv = b[b0 + kb * b_rs + (j0 + col) * b_cs];
            }
            bt[(idx / GT) * GT + col] = bv;
        }
        workgroupBarrier();
        for (var k = 0u; k < GK; k = k + 1u) {
            let ao = k * GT + lid.y;
            let bo = k * GT + lid.x;
            let av = vec4<f32>(at[ao], at[ao + 16u], at[ao + 32u], at[ao + 48u]);
            let bv = vec4<f32>(bt[bo], bt[bo + 16u], bt[bo + 32u], bt[bo + 48u]);
            acc0 = acc0 + av.x * bv;
            acc1 = acc1 + av.y * bv;
            acc2 = acc2 + av.z * bv;
            acc3 = acc3 + av.w * bv;
        }
        workgroupBarrier();
    }
    let c0 = p.c_off + z1 * p.c_s1 + z2 * p.c_s2;
    store_row(c0, i0 + lid.y, j0 + lid.x, acc0);
    store_row(c0, i0 + lid.y + 16u, j0 + lid.x, acc1);
    store_row(c0, i0 + lid.y + 32u, j0 + lid.x, acc2);
    store_row(c0, i0 + lid.y + 48u, j0 + lid.x, acc3);
}

// Row i of the block: columns j, j + 16, j + 32, j + 48 of C.
fn store_row(c0: u32, i: u32, j: u32, row: vec4<f32>) {
    for (var s = 0u; s < 4u; s = s + 1u) {
        let col = j + 16u * s;
        if (i < p.m && col < p.n) {
            let idx = c0 + i * p.c_rs + col * p.c_cs;
            var v = p.alpha * row[s];
            if (p.accumulate != 0u) {
                v = v + c[idx];
            }
            c[idx] = v;
        }
    }
}
