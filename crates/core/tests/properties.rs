//! Invariants (issue 2, must-show 5): causality, softmax rows sum to 1, linear matrices are consistent.

mod common;
use attnlab_core::attention::{AttnMatrixKind, AttnStage, TraceRequest};
use common::*;
use proptest::prelude::*;

fn configs() -> Vec<(String, attnlab_core::ModelConfig)> {
    all_configs()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Changing a future token never changes an earlier logit.
    #[test]
    fn causality(which in 0usize..1000, pos in 1usize..40, seed in 0u64..1000) {
        let all = configs();
        let (name, cfg) = &all[which % all.len()];
        let m = model(cfg, seed);
        let mut toks = tokens(48, cfg.vocab_size, seed);
        let v = cfg.vocab_size;
        let a = m.session().prefill_all(&toks).unwrap();
        toks[pos] = (toks[pos] + 1) % cfg.vocab_size as u32;
        let b = m.session().prefill_all(&toks).unwrap();
        prop_assert_eq!(&a[..pos * v], &b[..pos * v], "{} leaks the future", name);
        prop_assert_ne!(&a[pos * v..(pos + 1) * v], &b[pos * v..(pos + 1) * v]);
    }
}

#[test]
fn softmax_rows_sum_to_one_and_respect_the_mask() {
    for (name, cfg) in configs() {
        let m = model(&cfg, 3);
        let toks = tokens(40, cfg.vocab_size, 9);
        let tr = m
            .trace(&toks, TraceRequest { attention: true, gates: true, stage: AttnStage::Probabilities })
            .unwrap();
        assert_eq!(tr.attention.len(), cfg.n_layers, "{name}");
        for la in &tr.attention {
            for head in &la.heads {
                for i in 0..la.n {
                    let row = &head[i * la.n..(i + 1) * la.n];
                    assert!(
                        row[i + 1..].iter().all(|x| *x == 0.0),
                        "{name}: future weight in layer {}",
                        la.layer
                    );
                    match la.kind {
                        AttnMatrixKind::Probabilities => {
                            let s: f32 = row.iter().sum();
                            assert!((s - 1.0).abs() < 1e-4, "{name}: row {i} sums to {s}");
                            assert!(row.iter().all(|x| *x >= 0.0));
                        }
                        AttnMatrixKind::SignedNormalized => {
                            let s: f32 = row.iter().map(|x| x.abs()).sum();
                            assert!((s - 1.0).abs() < 1e-4, "{name}: |row| {i} sums to {s}");
                        }
                        AttnMatrixKind::ReluNormalized => {
                            let s: f32 = row.iter().sum();
                            assert!(s == 0.0 || (s - 1.0).abs() < 1e-4, "{name}: relu row {i} sums to {s}");
                        }
                        AttnMatrixKind::Scores => unreachable!(),
                    }
                }
            }
        }
        // Trace logits equal ordinary prefill logits.
        let plain = m.session().prefill_all(&toks).unwrap();
        assert_eq!(plain, tr.logits, "{name}: tracing changed the forward");
    }
}

#[test]
fn transnormer_diag_blocks_are_block_diagonal() {
    let all = configs();
    let (_, cfg) = all.iter().find(|(n, _)| n == "transnormer").unwrap();
    let m = model(cfg, 4);
    let tr = m
        .trace(&tokens(24, cfg.vocab_size, 1), TraceRequest { attention: true, ..Default::default() })
        .unwrap();
    let diag = &tr.attention[0];
    for head in &diag.heads {
        for i in 0..24 {
            for j in 0..24 {
                let same_block = i / 8 == j / 8 && j <= i;
                if !same_block {
                    assert_eq!(head[i * 24 + j], 0.0, "({i},{j}) outside the block");
                } else {
                    assert!(head[i * 24 + j] > 0.0, "({i},{j}) inside the block must be attended");
                }
            }
        }
    }
}

#[test]
fn stages_logits_plus_bias_give_biased() {
    let cfg = attnlab_core::ModelConfig::preset("alibi", tiny()).unwrap();
    let m = model(&cfg, 2);
    let toks = tokens(20, cfg.vocab_size, 2);
    let lg =
        m.trace(&toks, TraceRequest { attention: true, stage: AttnStage::Logits, gates: false }).unwrap();
    let bi =
        m.trace(&toks, TraceRequest { attention: true, stage: AttnStage::Biased, gates: false }).unwrap();
    let slopes = attnlab_core::bias::alibi_slopes(2);
    for (h, slope) in slopes.iter().enumerate() {
        for i in 0..20 {
            for j in 0..=i {
                let expect = lg.attention[0].heads[h][i * 20 + j] - *slope as f32 * (i - j) as f32;
                assert!((bi.attention[0].heads[h][i * 20 + j] - expect).abs() < 1e-5);
            }
        }
    }
}

#[test]
fn gates_are_recorded_for_gated_variants() {
    for id in ["gla", "regla", "retnet"] {
        let cfg = attnlab_core::ModelConfig::preset(id, tiny()).unwrap();
        let m = model(&cfg, 5);
        let tr = m
            .trace(&tokens(30, cfg.vocab_size, 3), TraceRequest { gates: true, ..Default::default() })
            .unwrap();
        assert_eq!(tr.gates.len(), 2, "{id}");
        for g in &tr.gates {
            assert_eq!(g.f.len(), 30 * 2 * 16);
            assert!(g.f.iter().all(|f| (0.0..=1.0).contains(f)), "{id}: F outside [0,1]");
            assert_eq!(g.g.is_some(), id == "regla");
        }
    }
    let retnet = attnlab_core::ModelConfig::preset("retnet", tiny()).unwrap();
    let tr = model(&retnet, 1)
        .trace(&tokens(5, 61, 1), TraceRequest { gates: true, ..Default::default() })
        .unwrap();
    // RetNet decay γ_h = 1 − 2^(−5−h) (RetNet, Sun et al., 2023).
    assert!((tr.gates[0].f[0] - (1.0 - 2f32.powi(-5))).abs() < 1e-6);
    assert!((tr.gates[0].f[16] - (1.0 - 2f32.powi(-6))).abs() < 1e-6);
}
