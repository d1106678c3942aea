//! GPU introspection ≡ CPU reference trace (issue 4: "the introspection the page needs"): attention
//! maps of every layer at every stage (implied matrices for linear layers), gates (F, g, r) and bias
//! tables, for every parity config (catalog ids, TransNormer T1, LRPE core × P, a hybrid); downsampled maps equal
//! `analysis::downsample_attention` of the CPU's full matrices. Runs on any adapter (CI: lavapipe);
//! without one the tests fail unless `ATTNLAB_SKIP_GPU=1`.

use attnlab_core::analysis::{attention_window, downsample_attention, MapWindow};
use attnlab_core::attention::{AttnStage, LayerAttention, TraceRequest};
use attnlab_core::config::{ModelConfig, SizePreset};
use attnlab_core::Model;
use attnlab_gpu::{linear_map_loop_iterations, GpuContext, GpuModel, MAX_MAP_SIDE};
use common::{architecture_configs, configs_with, context, tiny, tokens, with_random_biases};

mod common;

/// Map cells are probabilities, normalised weights or scores of order 1: absolute tolerance.
const TOL: f32 = 2e-4;

/// The parity configs (every catalog id, TransNormer T1, LRPE core × P, hybrid) with 160 positions.
fn configs() -> Vec<(String, ModelConfig)> {
    configs_with(160)
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

fn compare_maps(what: &str, cpu: &[LayerAttention], gpu: &[LayerAttention], tol: f32) {
    assert_eq!(cpu.len(), gpu.len(), "{what}: layer count");
    for (c, g) in cpu.iter().zip(gpu) {
        assert_eq!((c.layer, c.kind, c.n), (g.layer, g.kind, g.n), "{what}: layer {} header", c.layer);
        for (h, (cm, gm)) in c.heads.iter().zip(&g.heads).enumerate() {
            // Scores can be large (bias tables): compare relative to the map's scale.
            let scale = cm.iter().fold(1.0f32, |m, x| m.max(x.abs()));
            let e = max_abs_diff(cm, gm) / scale;
            assert!(e <= tol, "{what}: layer {} head {h}: max |cpu − gpu| / scale = {e:.2e}", c.layer);
        }
    }
}

/// Exact maps (n ≤ MAX_MAP_SIDE) at every stage and gates, for every variant.
#[test]
fn maps_and_gates_match_the_cpu_trace_for_every_variant() {
    let Some(ctx) = context() else { return };
    for (name, cfg) in configs() {
        let model = Model::random(cfg.clone(), 5).expect("model");
        let stages = [AttnStage::Logits, AttnStage::Biased, AttnStage::Probabilities];
        check_trace(&ctx, &name, &model, &stages);
    }
}

/// The architecture options of imported checkpoints (biases randomized) in a trace: exact maps at
/// every stage, gates and the last logits.
#[test]
fn maps_and_gates_match_the_cpu_trace_for_every_architecture_config() {
    let Some(ctx) = context() else { return };
    for (name, cfg) in architecture_configs() {
        let (model, _) = with_random_biases(&Model::random(cfg.clone(), 5).expect("model"), 3);
        let stages = [AttnStage::Logits, AttnStage::Biased, AttnStage::Probabilities];
        check_trace(&ctx, &name, &model, &stages);
    }
}

/// GPU trace ≡ CPU trace of 37 tokens at each of `stages`: maps, gates, last-token logits.
fn check_trace(ctx: &GpuContext, name: &str, model: &Model, stages: &[AttnStage]) {
    let (n, cfg) = (37, model.config());
    let toks = tokens(n, cfg.vocab_size, 11);
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), model)).expect("upload");
    for &stage in stages {
        let req = TraceRequest { attention: true, stage, gates: true };
        let cpu = model.trace(&toks, req).expect("cpu trace");
        let gpu = pollster::block_on(gm.trace(&toks, req, MAX_MAP_SIDE)).expect("gpu trace");
        assert_eq!((gpu.tokens, gpu.stride), (n, 1));
        compare_maps(&format!("{name} {stage:?}"), &cpu.attention, &gpu.trace.attention, TOL);
        let v = cfg.vocab_size;
        let last = &cpu.logits[(n - 1) * v..n * v];
        let e = max_abs_diff(last, &gpu.trace.logits);
        assert!(e < 1e-3, "{name}: last-token logits differ by {e}");
        assert_eq!(cpu.gates.len(), gpu.trace.gates.len(), "{name}: gated layers");
        for (c, g) in cpu.gates.iter().zip(&gpu.trace.gates) {
            assert_eq!(
                (c.layer, &c.variant, c.n, c.n_heads, c.dim),
                (g.layer, &g.variant, g.n, g.n_heads, g.dim)
            );
            let e = max_abs_diff(&c.f, &g.f);
            assert!(e < 1e-4, "{name}: layer {} F differs by {e}", c.layer);
            for (cq, gq) in [(&c.g, &g.g), (&c.r, &g.r)] {
                assert_eq!(cq.is_some(), gq.is_some());
                if let (Some(a), Some(b)) = (cq, gq) {
                    assert!(max_abs_diff(a, b) < 1e-4, "{name}: ReGLA g/r differ");
                }
            }
        }
    }
}

/// Beyond the bound the GPU downsamples: its maps equal the CPU's full matrices downsampled by
/// the core reference, rows still sum to 1 for probabilities.
#[test]
fn downsampled_maps_match_the_core_reference() {
    let Some(ctx) = context() else { return };
    let n = 150;
    let side = 16;
    for name in ["alibi", "fire", "transnormer", "regla", "linear-elu", "hybrid-regla-alibi"] {
        let (_, cfg) = configs().into_iter().find(|(n, _)| n == name).expect("config");
        let model = Model::random(cfg.clone(), 8).expect("model");
        let toks = tokens(n, cfg.vocab_size, 4);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        for stage in [AttnStage::Biased, AttnStage::Probabilities] {
            let req = TraceRequest { attention: true, stage, gates: false };
            let cpu = model.trace(&toks, req).expect("cpu trace");
            let gpu = pollster::block_on(gm.trace(&toks, req, side)).expect("gpu trace");
            assert_eq!(gpu.stride, 10, "150 tokens in at most 16 rows → stride 10");
            let reference: Vec<LayerAttention> =
                cpu.attention.iter().map(|la| downsample_attention(la, gpu.stride)).collect();
            assert!(gpu.trace.attention.iter().all(|la| la.n == 15));
            compare_maps(&format!("{name} {stage:?} downsampled"), &reference, &gpu.trace.attention, TOL);
        }
    }
}

/// Windows of a held trace (the page's zoom tiles), for every variant: an exact cut across the
/// diagonal, a strided window from an unaligned origin (its last rows clamped to the last query),
/// and the whole map, each equal to the core's `attention_window` of the CPU's full matrices.
#[test]
fn map_windows_of_a_held_trace_match_the_core_reference_for_every_variant() {
    let Some(ctx) = context() else { return };
    let n = 150;
    let windows = [
        MapWindow { row0: 70, col0: 40, side: 48, stride: 1 },
        MapWindow { row0: 13, col0: 5, side: 24, stride: 6 },
        MapWindow::whole(n, 40),
    ];
    for (name, cfg) in configs() {
        let model = Model::random(cfg.clone(), 6).expect("model");
        let toks = tokens(n, cfg.vocab_size, 9);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        for stage in [AttnStage::Biased, AttnStage::Probabilities] {
            let req = TraceRequest { attention: true, stage, gates: false };
            let cpu = model.trace(&toks, req).expect("cpu trace");
            let (_, held) = pollster::block_on(gm.trace_held(&toks, req, 32)).expect("gpu trace");
            assert_eq!(held.tokens(), n);
            for w in windows {
                for la in &cpu.attention {
                    let gpu = pollster::block_on(gm.map_window(&held, la.layer, w)).expect("window");
                    let what = format!("{name} {stage:?} layer {} window {w:?}", la.layer);
                    compare_maps(&what, &[attention_window(la, w)], &[gpu], TOL);
                }
            }
        }
        // A window outside the trace is refused by name, not drawn.
        let (_, held) = pollster::block_on(gm.trace_held(&toks, TraceRequest::default(), 32)).expect("trace");
        let far = MapWindow { row0: n, col0: 0, side: 8, stride: 1 };
        let e = pollster::block_on(gm.map_window(&held, 0, far)).expect_err("outside");
        assert!(e.to_string().contains("outside the 150 tokens"), "{e}");
    }
}

/// The page's longest traces, 8,192 tokens, for one layer (so the CPU's full matrices fit in memory):
/// a softmax variant, a decaying linear one, Fast Decay's value-axis gates and 1+elu without decay
/// (its rows keep weight on the first keys). The binned whole map and single-token windows deep in
/// the trace (the last queries' attention to the first keys, and across the diagonal) equal the
/// core's windows of the CPU's matrices. (The linear maps once came back with zero rows past query
/// ≈ 3,500 on lavapipe: llvmpipe's cap on an invocation's loop iterations, see
/// `linear_maps_llvmpipe_cannot_loop_through_are_refused`.)
#[test]
fn the_longest_held_traces_serve_their_binned_maps_and_exact_windows() {
    let Some(ctx) = context() else { return };
    let n = 8192;
    for id in ["alibi", "retnet", "fast-decay", "linear-elu"] {
        let cfg = ModelConfig::preset(id, SizePreset { n_layers: 1, ..tiny(n) }).expect("preset");
        let model = Model::random(cfg.clone(), 4).expect("model");
        let toks = tokens(n, cfg.vocab_size, 5);
        let req = TraceRequest { attention: true, stage: AttnStage::Probabilities, gates: false };
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let (gpu, held) = pollster::block_on(gm.trace_held(&toks, req, MAX_MAP_SIDE)).expect("gpu trace");
        let stride = n / MAX_MAP_SIDE;
        assert_eq!((gpu.tokens, gpu.stride, gpu.trace.attention[0].n), (n, stride, MAX_MAP_SIDE));
        let cpu = model.trace(&toks, req).expect("cpu trace");
        let whole = downsample_attention(&cpu.attention[0], stride);
        compare_maps(&format!("{id} {n} whole"), &[whole], &gpu.trace.attention, TOL);
        let deep = [
            MapWindow { row0: n - 256, col0: 0, side: 256, stride: 1 },
            MapWindow { row0: n - 700, col0: n - 800, side: 200, stride: 1 },
            MapWindow { row0: n / 2, col0: n / 4, side: 128, stride: 8 },
        ];
        for w in deep {
            let window = pollster::block_on(gm.map_window(&held, 0, w)).expect("window");
            compare_maps(
                &format!("{id} {n} {w:?}"),
                &[attention_window(&cpu.attention[0], w)],
                &[window],
                TOL,
            );
        }
    }
}

/// Where the driver caps an invocation's loop iterations (Mesa's llvmpipe, CI's adapter), a linear
/// map the cap would cut short is refused by name before any work, and one within it is served;
/// elsewhere both are served. Fast Decay with 96-wide heads: 3 + 3 channel chunks.
#[test]
fn linear_maps_llvmpipe_cannot_loop_through_are_refused() {
    let Some(ctx) = context() else { return };
    let (small, wide) = (linear_map_loop_iterations(8192, 16, 16), linear_map_loop_iterations(8192, 96, 96));
    assert!(small < 65_535 && wide > 65_535, "bounds {small}, {wide}");
    let n = 8192;
    let size = SizePreset { n_layers: 1, n_heads: 1, head_dim: 96, d_model: 96, ..tiny(n) };
    let cfg = ModelConfig::preset("fast-decay", size).expect("preset");
    let model = Model::random(cfg.clone(), 4).expect("model");
    let req = TraceRequest { attention: true, stage: AttnStage::Probabilities, gates: false };
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
    let capped = ctx.caps().loop_iterations.is_some_and(|cap| cap < wide);
    let short = tokens(640, cfg.vocab_size, 5);
    let (_, held) =
        pollster::block_on(gm.trace_held(&short, req, 64)).expect("a short trace is within any cap");
    let w = MapWindow { row0: 600, col0: 0, side: 40, stride: 1 };
    pollster::block_on(gm.map_window(&held, 0, w)).expect("window");
    let long = tokens(n, cfg.vocab_size, 5);
    match pollster::block_on(gm.trace_held(&long, req, 64)) {
        Err(e) if capped => {
            let msg = e.to_string();
            assert!(
                msg.contains("layer 0's attention map over 8192 tokens") && msg.contains("at most"),
                "{msg}"
            );
        }
        Err(e) => panic!("refused without a loop cap: {e}"),
        Ok(_) => assert!(!capped, "{} should refuse the map", ctx.caps().adapter),
    }
}

/// Bias tables read back from the GPU are the core's tables; layers without one say so.
#[test]
fn bias_tables_read_back_from_the_gpu() {
    let Some(ctx) = context() else { return };
    for (name, cfg) in configs() {
        let model = Model::random(cfg.clone(), 2).expect("model");
        let gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        for layer in 0..cfg.n_layers {
            let gpu = pollster::block_on(gm.bias_table(layer)).expect("bias table");
            let curves = attnlab_core::analysis::kernel_curves(&model, layer, 20);
            if name == "cope" {
                // A contextual bias depends on q and k: no distance table, no curve.
                assert!(gpu.is_none() && curves.is_err(), "{name}: layer {layer} has no bias table");
                continue;
            }
            let cpu = curves.expect("curves");
            match gpu {
                Some((len, values)) => {
                    assert_eq!(len, cfg.max_context, "{name}: table length");
                    for curve in &cpu {
                        for (d, b) in curve.bias.iter().enumerate() {
                            let g = values[curve.head * len + d];
                            assert!(
                                (g - *b as f32).abs() <= 1e-5 * b.abs().max(1.0) as f32,
                                "{name}: B_{}({d})",
                                curve.head
                            );
                        }
                    }
                }
                None => assert!(
                    !matches!(name.as_str(), "alibi" | "kerple-log" | "t5" | "mep"),
                    "{name}: layer {layer} should have a bias table"
                ),
            }
        }
    }
    assert!(pollster::block_on(
        pollster::block_on(GpuModel::new(ctx.clone(), &Model::random(configs()[0].1.clone(), 1).expect("m")))
            .expect("upload")
            .bias_table(99)
    )
    .is_err());
}

/// Bad input: empty and over-long token lists are typed errors.
#[test]
fn trace_rejects_empty_and_too_long_input() {
    let Some(ctx) = context() else { return };
    let (_, cfg) = configs().into_iter().find(|(n, _)| n == "alibi").expect("config");
    let model = Model::random(cfg.clone(), 1).expect("model");
    let mut gm = pollster::block_on(GpuModel::new(ctx, &model)).expect("upload");
    let req = TraceRequest { attention: true, stage: AttnStage::Probabilities, gates: true };
    assert!(pollster::block_on(gm.trace(&[], req, 64)).is_err());
    let long = tokens(cfg.max_context + 1, cfg.vocab_size, 1);
    let e = pollster::block_on(gm.trace(&long, req, 64)).expect_err("too long");
    assert!(e.to_string().contains("context"), "{e}");
}
