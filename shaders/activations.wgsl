// Snippet (prepended by crates/gpu/src/shaders.rs to elementwise.wgsl and decode.wgsl): the FFN
// activations.

fn gelu(x: f32) -> f32 {
    let c = 0.7978846;
    let t = clamp(c * (x + 0.044715 * x * x * x), -15.0, 15.0);
    return 0.5 * x * (1.0 + tanh(t));
}

// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7 for x ≥ 0; odd symmetry for x < 0).
fn erf(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

// GELU, exact: x·Φ(x) = ½x(1 + erf(x/√2)).
fn gelu_exact(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf(x * 0.70710678));
}

fn silu(x: f32) -> f32 {
    return x / (1.0 + exp(min(-x, 80.0)));
}
