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
    let c0 = p.c_off + z1 * p.c_s1 + z2 * p.c_s2;
    let i0 = wg.y * GT;
    let j0 = wg.x * GT;
    var acc: array<f32, 16>;
    for (var k0 = 0u; k0 < p.k; k0 = k0 + GK) {
        // 256 invocations stage 64 × 16 values of each operand, four each: A along k (row t,
        // depth idx % 16), B along its columns (depth idx / 64, column idx % 64).
        for (var q = 0u; q < 4u; q = q + 1u) {
            let idx = li + 256u * q;
            let t = idx / GK;
            let ka = k0 + idx % GK;
            var av = 0.0;
            if (i0 + t < p.m && ka < p.k) {
                av = a[a0 + (i0 + t) * p.a_rs + ka * p.a_cs];
            }
            at[(idx % GK) * GT + t] = av;
            let kb = k0 + idx / GT;
            let col = idx % GT;
            var bv = 0.0;
            if (j0 + col < p.n && kb < p.k) {
                bv = b[b0 + kb * p.b_rs + (j0 + col) * p.b_cs];
            }
            bt[(idx / GT) * GT + col] = bv;
        }
        workgroupBarrier();
        for (var k = 0u; k < GK; k = k + 1u) {
            var ar: array<f32, 4>;
            var br: array<f32, 4>;
            for (var r = 0u; r < 4u; r = r + 1u) {
                ar[r] = at[k * GT + lid.y + 16u * r];
                br[r] = bt[k * GT + lid.x + 16u * r];
            }
            for (var r = 0u; r < 4u; r = r + 1u) {
                for (var s = 0u; s < 4u; s = s + 1u) {
                    acc[r * 4u + s] = acc[r * 4u + s] + ar[r] * br[s];
                }
            }
        }
        workgroupBarrier();
    }
    for (var r = 0u; r < 4u; r = r + 1u) {
        let i = i0 + lid.y + 16u * r;
        for (var s = 0u; s < 4u; s = s + 1u) {
            let j = j0 + lid.x + 16u * s;
            if (i < p.m && j < p.n) {
                let idx = c0 + i * p.c_rs + j * p.c_cs;
                var v = p.alpha * acc[r * 4u + s];
                if (p.accumulate != 0u) {
                    v = v + c[idx];
                }
                c[idx] = v;
            }
        }
    }
}
