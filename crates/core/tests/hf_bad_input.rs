//! Bad Hugging Face checkpoints are refused with a typed error naming the file and the field or
//! tensor at fault, never a panic (issue 13, "Bad input"). Every bad input is a copy of a fixture
//! of `tests/fixtures/hf/` in a temporary folder with one thing changed: the config edited with
//! serde_json, a shard rewritten with the safetensors crate, the index edited, a file cut or
//! deleted. A proptest mutates config and index text at random and checks that `hf::import` only
//! ever returns.

mod common;

use attnlab_core::hf::{self, import_dir, ImportOptions, Imported, INDEX_FILE, SINGLE_FILE};
use attnlab_core::{Error, Model};
use proptest::prelude::*;
use safetensors::{tensor::TensorView, Dtype, SafeTensors};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

const SHARDED: &str = "llama-headdim-linear-f16-sharded";
const SHARD1: &str = "model-00001-of-00003.safetensors";
const SHARD2: &str = "model-00002-of-00003.safetensors";
const SHARD3: &str = "model-00003-of-00003.safetensors";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf").join(name)
}

/// One stored tensor, as raw bytes.
#[derive(Clone)]
struct Raw {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    data: Vec<u8>,
}

impl Raw {
    fn new(name: &str, dtype: Dtype, shape: &[usize], data: Vec<u8>) -> Raw {
        Raw { name: name.to_string(), dtype, shape: shape.to_vec(), data }
    }
}

fn read_tensors(bytes: &[u8]) -> Vec<Raw> {
    let st = SafeTensors::deserialize(bytes).expect("fixture shard parses");
    let mut out: Vec<Raw> = st
        .tensors()
        .into_iter()
        .map(|(n, v)| Raw::new(&n, v.dtype(), v.shape(), v.data().to_vec()))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn write_tensors(tensors: &[Raw]) -> Vec<u8> {
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|t| (t.name.clone(), TensorView::new(t.dtype, t.shape.clone(), &t.data).expect("valid view")))
        .collect();
    let meta = Some(HashMap::from([("format".to_string(), "pt".to_string())]));
    safetensors::serialize(views, &meta).expect("serialize")
}

/// A copy of one fixture in a fresh temporary folder (removed on drop), edited in place.
struct Case {
    dir: PathBuf,
}

impl Case {
    fn new(name: &str) -> Case {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "attnlab-hf-bad-input-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        for entry in std::fs::read_dir(fixture(name)).expect("fixture dir") {
            let path = entry.expect("dir entry").path();
            std::fs::copy(&path, dir.join(path.file_name().expect("file name"))).expect("copy fixture file");
        }
        Case { dir }
    }

    fn read(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.dir.join(file)).expect("read copy")
    }

    fn write(&self, file: &str, bytes: &[u8]) -> &Case {
        std::fs::write(self.dir.join(file), bytes).expect("write copy");
        self
    }

    fn remove(&self, file: &str) -> &Case {
        std::fs::remove_file(self.dir.join(file)).expect("remove file");
        self
    }

    fn edit_json(&self, file: &str, edit: impl FnOnce(&mut Map<String, Value>)) -> &Case {
        let mut v: Value = serde_json::from_slice(&self.read(file)).expect("fixture JSON");
        edit(v.as_object_mut().expect("JSON object"));
        self.write(file, serde_json::to_string_pretty(&v).expect("JSON").as_bytes())
    }

    /// Edit `config.json` as a JSON object.
    fn config(&self, edit: impl FnOnce(&mut Map<String, Value>)) -> &Case {
        self.edit_json("config.json", edit)
    }

    /// Set one key of `config.json` (`Value::Null` removes it).
    fn set(&self, key: &str, value: Value) -> &Case {
        self.config(|c| {
            match value {
                Value::Null => c.remove(key),
                v => c.insert(key.to_string(), v),
            };
        })
    }

    /// Edit the `weight_map` of the index.
    fn index(&self, edit: impl FnOnce(&mut Map<String, Value>)) -> &Case {
        self.edit_json(INDEX_FILE, |i| edit(i["weight_map"].as_object_mut().expect("weight_map object")))
    }

    /// Rewrite one shard's tensors.
    fn shard(&self, file: &str, edit: impl FnOnce(&mut Vec<Raw>)) -> &Case {
        let mut tensors = read_tensors(&self.read(file));
        edit(&mut tensors);
        self.write(file, &write_tensors(&tensors))
    }

    fn import(&self) -> attnlab_core::Result<Imported> {
        import_dir(&self.dir, ImportOptions::default())
    }

    fn err(&self) -> Error {
        match self.import() {
            Ok(i) => panic!("expected an error, but {} imported", i.architecture),
            Err(e) => e,
        }
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `e` is an [`Error::Import`] of `file` whose message names every one of `names`.
#[track_caller]
fn assert_import(e: &Error, file: &str, names: &[&str]) {
    let msg = e.to_string();
    match e {
        Error::Import { file: f, .. } => assert_eq!(f, file, "wrong file in `{msg}`"),
        other => panic!("expected Error::Import of {file}, got {other:?}"),
    }
    assert!(msg.starts_with(&format!("{file}: ")), "`{msg}` does not start with the file");
    for n in names {
        assert!(msg.contains(n), "`{msg}` does not name {n}");
    }
}

/// `e` is an [`Error::Import`] of `config.json` naming `field`.
#[track_caller]
fn assert_field(e: &Error, field: &str) {
    assert_import(e, "config.json", &[&format!("field `{field}`")]);
}

/// `e` is an [`Error::Unsupported`] whose message names every one of `names`.
#[track_caller]
fn assert_unsupported(e: &Error, names: &[&str]) {
    let msg = e.to_string();
    assert!(matches!(e, Error::Unsupported(_)), "expected Error::Unsupported, got {e:?}");
    for n in names {
        assert!(msg.contains(n), "`{msg}` does not name {n}");
    }
}

#[test]
fn every_fixture_copy_imports() {
    // The baseline of every test below: an unedited copy imports.
    for name in [
        "gpt2",
        "gpt2-untied-inner",
        "bloom-4-heads-f16",
        "llama-gqa-untied",
        SHARDED,
        "neox-partial-parallel",
    ] {
        Case::new(name).import().unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn unknown_or_missing_architecture() {
    let case = Case::new("llama-gqa-untied");
    let e = case.set("architectures", json!(["MptForCausalLM"])).err();
    assert_unsupported(&e, &["MptForCausalLM", "is not supported", "LlamaForCausalLM", "GPT2LMHeadModel"]);
    let e = case.set("architectures", json!(["LlamaForSequenceClassification"])).err();
    assert_unsupported(&e, &["LlamaForSequenceClassification"]);
    for bad in [Value::Null, json!([]), json!("LlamaForCausalLM"), json!([3]), json!({})] {
        let e = case.set("architectures", bad.clone()).err();
        assert_field(&e, "architectures");
    }
}

#[test]
fn unsupported_rope_scaling_is_refused_in_both_forms() {
    for kind in ["yarn", "dynamic", "longrope"] {
        // transformers 5: `rope_parameters` with `rope_type`.
        let case = Case::new("llama-gqa-untied");
        let params = json!({"rope_type": kind, "factor": 4.0, "rope_theta": 500.0, "original_max_position_embeddings": 16});
        assert_unsupported(&case.set("rope_parameters", params).err(), &["rope_scaling type", kind]);
        // Legacy `rope_scaling`, keyed `type` (older) and `rope_type` (transformers 4.4x).
        for key in ["type", "rope_type"] {
            let case = Case::new("llama-gqa-untied");
            let e = case.set("rope_scaling", json!({key: kind, "factor": 2.0})).err();
            assert_unsupported(&e, &["rope_scaling type", kind]);
        }
        // GPT-NeoX reads the same settings.
        let case = Case::new("neox-sequential-tanh-tied-nobias");
        let e = case.config(|c| c["rope_parameters"]["rope_type"] = json!(kind)).err();
        assert_unsupported(&e, &["rope_scaling type", kind]);
        let case = Case::new("neox-partial-parallel");
        assert_unsupported(&case.set("rope_scaling", json!({"type": kind, "factor": 2.0})).err(), &[kind]);
    }
    // The sharded fixture's linear scaling, switched to dynamic.
    let case = Case::new(SHARDED);
    let e = case.config(|c| c["rope_parameters"]["rope_type"] = json!("dynamic")).err();
    assert_unsupported(&e, &["rope_scaling type dynamic"]);
}

#[test]
fn unsupported_architecture_options_are_refused_by_name() {
    let case = Case::new("llama-gqa-untied");
    assert_unsupported(
        &case.set("hidden_act", json!("gelu")).err(),
        &["hidden_act gelu", "LlamaForCausalLM", "only silu"],
    );
    let case = Case::new("gpt2");
    assert_unsupported(
        &case.set("scale_attn_by_inverse_layer_idx", json!(true)).err(),
        &["scale_attn_by_inverse_layer_idx = true", "GPT2LMHeadModel"],
    );
    let case = Case::new("gpt2");
    assert_unsupported(&case.set("scale_attn_weights", json!(false)).err(), &["scale_attn_weights = false"]);
    let case = Case::new("gpt2");
    assert_unsupported(&case.set("add_cross_attention", json!(true)).err(), &["add_cross_attention = true"]);
    let case = Case::new("gpt2");
    assert_unsupported(&case.set("activation_function", json!("relu")).err(), &["activation_function relu"]);
    let case = Case::new("bloom-6-heads");
    assert_unsupported(
        &case.set("apply_residual_connection_post_layernorm", json!(true)).err(),
        &["apply_residual_connection_post_layernorm = true", "BloomForCausalLM"],
    );
    let case = Case::new("neox-partial-parallel");
    assert_unsupported(
        &case.set("hidden_act", json!("relu")).err(),
        &["hidden_act relu", "GPTNeoXForCausalLM"],
    );
    // fla GLA options that change the math.
    for (key, value, named) in [
        ("use_short_conv", json!(true), "use_short_conv = true"),
        ("use_output_gate", json!(false), "use_output_gate = false"),
        ("attn", json!({"layers": [1], "num_heads": 4}), "hybrid softmax attention layers"),
        ("feature_map", json!("relu"), "feature_map = \"relu\""),
        ("clamp_min", json!(-0.5), "clamp_min = -0.5"),
        ("hidden_act", json!("gelu"), "hidden_act gelu"),
    ] {
        let case = Case::new("gla-narrow-keys-untied-bf16");
        assert_unsupported(&case.set(key, value).err(), &[named, "GLAForCausalLM"]);
    }
}

#[test]
fn ill_typed_and_out_of_range_fields_name_the_field() {
    // (fixture, key, value, field the error must name)
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        ("llama-gqa-untied", "hidden_size", json!("32"), "hidden_size"),
        ("llama-gqa-untied", "num_hidden_layers", json!(0), "num_hidden_layers"),
        ("llama-gqa-untied", "num_attention_heads", json!(-4), "num_attention_heads"),
        ("llama-gqa-untied", "num_key_value_heads", json!(2.5), "num_key_value_heads"),
        ("llama-gqa-untied", "vocab_size", Value::Null, "vocab_size"),
        ("llama-gqa-untied", "head_dim", json!(0), "head_dim"),
        ("llama-gqa-untied", "rms_norm_eps", json!("1e-5"), "rms_norm_eps"),
        ("llama-gqa-untied", "rope_theta", json!([500]), "rope_theta"),
        ("llama-gqa-untied", "tie_word_embeddings", json!("false"), "tie_word_embeddings"),
        ("llama-gqa-untied", "hidden_act", json!(1), "hidden_act"),
        ("llama-gqa-untied", "max_position_embeddings", json!(-64), "max_position_embeddings"),
        ("gpt2", "n_embd", json!("32"), "n_embd"),
        ("gpt2", "n_layer", json!(2.5), "n_layer"),
        ("gpt2", "n_positions", json!(0), "n_positions"),
        ("gpt2", "n_inner", json!(-1), "n_inner"),
        ("gpt2", "layer_norm_epsilon", json!(false), "layer_norm_epsilon"),
        ("gpt2", "scale_attn_by_inverse_layer_idx", json!("no"), "scale_attn_by_inverse_layer_idx"),
        ("bloom-6-heads", "n_head", json!(-6), "n_head"),
        ("bloom-6-heads", "vocab_size", json!("96"), "vocab_size"),
        ("neox-partial-parallel", "intermediate_size", json!(-64), "intermediate_size"),
        ("neox-partial-parallel", "rotary_pct", json!("0.25"), "rotary_pct"),
        ("neox-partial-parallel", "use_parallel_residual", json!(1), "use_parallel_residual"),
        // num_attention_heads must divide hidden_size (no explicit head_dim).
        ("neox-partial-parallel", "num_attention_heads", json!(3), "num_attention_heads"),
        ("bloom-6-heads", "n_head", json!(5), "n_head"),
        ("gpt2", "n_head", json!(3), "n_head"),
        // fla: key and value widths d·expand must split over the heads (d = 32, 4 heads).
        ("gla-narrow-keys-untied-bf16", "expand_k", json!(0.3), "expand_k"),
        ("gla-narrow-keys-untied-bf16", "expand_v", json!("1"), "expand_v"),
        ("gla-gqa-unfused-tied-f16", "num_kv_heads", json!(3), "num_kv_heads"),
        ("gla-gqa-unfused-tied-f16", "norm_eps", json!(-1e-5), "norm_eps"),
        ("llama-gqa-untied", "rms_norm_eps", json!(0.0), "rms_norm_eps"),
        ("bloom-6-heads", "layer_norm_epsilon", json!(-1.0), "layer_norm_epsilon"),
        // Rotary channels: an even number in (0, head_dim] (head_dim 8 here: 0.375 → 3 channels).
        ("neox-partial-parallel", "rotary_pct", json!(0.375), "rotary_pct"),
        ("neox-partial-parallel", "rotary_pct", json!(0.0), "rotary_pct"),
        ("neox-partial-parallel", "rotary_pct", json!(1.5), "rotary_pct"),
        ("neox-partial-parallel", "rotary_pct", json!(0.1), "rotary_pct"),
    ];
    for (name, key, value, field) in cases {
        let e = Case::new(name).set(key, value.clone()).err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Import { .. }), "{name} {key}={value}: {e:?}");
        assert!(
            msg.starts_with("config.json: ") && msg.contains(&format!("`{field}`")),
            "{name} {key}={value}: {msg}"
        );
    }
    let e = Case::new("neox-partial-parallel").set("num_attention_heads", json!(3)).err();
    assert_field(&e, "num_attention_heads");
    assert!(e.to_string().contains("does not divide hidden_size 32"), "{e}");

    // The same options inside `rope_parameters` name their path there.
    let case = Case::new("neox-sequential-tanh-tied-nobias");
    let e = case.config(|c| c["rope_parameters"]["partial_rotary_factor"] = json!(0.375)).err();
    assert_field(&e, "rope_parameters.partial_rotary_factor");
    let e = case.config(|c| c["rope_parameters"]["rope_theta"] = json!("1000")).err();
    assert_field(&e, "rope_parameters.rope_theta");
    let case = Case::new(SHARDED);
    let e = case.config(|c| c["rope_parameters"]["factor"] = json!(0.0)).err();
    assert_field(&e, "rope_parameters.factor");
    let e = case.config(|c| c["rope_parameters"]["rope_type"] = json!(7)).err();
    assert_field(&e, "rope_parameters.rope_type");
    let case = Case::new("llama-gqa-untied");
    let e = case.set("rope_scaling", json!({"type": "linear", "factor": -2.0})).err();
    assert_field(&e, "rope_scaling.factor");
    let case = Case::new("llama-mqa-bias-llama3-bf16");
    let e = case
        .config(|c| {
            c["rope_parameters"].as_object_mut().expect("object").remove("original_max_position_embeddings");
        })
        .err();
    assert_field(&e, "rope_parameters.original_max_position_embeddings");
    let e = Case::new("llama-gqa-untied").write("config.json", b"{\"architectures\": [\"Llama").err();
    assert_import(&e, "config.json", &["not valid JSON"]);
    let e = Case::new("llama-gqa-untied").write("config.json", b"[1, 2]").err();
    assert_import(&e, "config.json", &["not a JSON object"]);
}

#[test]
fn absurd_sizes_are_errors_not_panics_or_huge_allocations() {
    for (name, key) in [
        ("llama-gqa-untied", "num_hidden_layers"),
        ("llama-gqa-untied", "hidden_size"),
        ("llama-gqa-untied", "intermediate_size"),
        ("llama-gqa-untied", "num_key_value_heads"),
        ("llama-gqa-untied", "head_dim"),
        ("llama-gqa-untied", "vocab_size"),
        ("llama-gqa-untied", "max_position_embeddings"),
        ("bloom-6-heads", "hidden_size"),
        ("bloom-6-heads", "n_layer"),
        ("gpt2", "n_embd"),
        ("gpt2", "n_inner"),
        ("gpt2", "n_positions"),
        ("gpt2", "n_layer"),
        ("neox-partial-parallel", "hidden_size"),
        ("neox-partial-parallel", "num_hidden_layers"),
        ("gla-narrow-keys-untied-bf16", "hidden_size"),
        ("gla-narrow-keys-untied-bf16", "num_hidden_layers"),
        ("gla-narrow-keys-untied-bf16", "vocab_size"),
        // Regression: the MLP width 2/3 · hidden_ratio · d overflowed (found by the proptest below).
        ("gla-narrow-keys-untied-bf16", "hidden_ratio"),
    ] {
        for v in [u64::MAX, 1 << 62, 1 << 40, 1_000_000_000] {
            let case = Case::new(name);
            let e = case.set(key, json!(v)).err();
            let msg = e.to_string();
            assert!(matches!(e, Error::Import { .. } | Error::ConfigField { .. }), "{name} {key}={v}: {e:?}");
            assert!(msg.starts_with("config.json: ") || msg.contains("tensor `"), "{name} {key}={v}: {msg}");
        }
    }
}

#[test]
fn missing_tensor_names_the_file_and_the_tensor() {
    let case = Case::new("gpt2-untied-inner");
    let e = case.shard(SINGLE_FILE, |t| t.retain(|t| t.name != "lm_head.weight")).err();
    assert_import(&e, SINGLE_FILE, &["missing tensor `lm_head.weight`"]);
    let case = Case::new("bloom-4-heads-f16");
    let e = case
        .shard(SINGLE_FILE, |t| t.retain(|t| t.name != "transformer.h.1.self_attention.dense.bias"))
        .err();
    assert_import(&e, SINGLE_FILE, &["`transformer.h.1.self_attention.dense.bias`"]);
    // Sharded: the index names the tensor, the shard lacks it.
    let case = Case::new(SHARDED);
    let e = case.shard(SHARD2, |t| t.retain(|t| t.name != "model.norm.weight")).err();
    assert_import(&e, SHARD2, &["`model.norm.weight`", "missing"]);
    // Sharded, gone from the index and the shard: the index is at fault.
    let e = case
        .shard(SHARD2, |t| t.retain(|t| t.name != "model.layers.1.self_attn.q_proj.weight"))
        .index(|m| {
            m.remove("model.layers.1.self_attn.q_proj.weight");
            m.remove("model.norm.weight");
        })
        .err();
    assert_import(&e, INDEX_FILE, &["missing tensor `model."]);
}

#[test]
fn unexpected_tensor_names_the_file_and_the_tensor() {
    let case = Case::new("llama-gqa-untied");
    let extra = Raw::new("model.layers.0.self_attn.mystery.weight", Dtype::F32, &[2], vec![0; 8]);
    let e = case.shard(SINGLE_FILE, |t| t.push(extra.clone())).err();
    assert_import(&e, SINGLE_FILE, &["unexpected tensor `model.layers.0.self_attn.mystery.weight`"]);
    // A third layer's tensor with the config saying two.
    let case = Case::new("gpt2");
    let extra = Raw::new("transformer.h.2.ln_1.weight", Dtype::F32, &[32], vec![0; 128]);
    let e = case.shard(SINGLE_FILE, |t| t.push(extra.clone())).err();
    assert_import(&e, SINGLE_FILE, &["unexpected tensor `transformer.h.2.ln_1.weight`"]);
    // Biases a config without biases does not use.
    let case = Case::new("neox-sequential-tanh-tied-nobias");
    let extra = Raw::new("gpt_neox.layers.0.attention.dense.bias", Dtype::F32, &[32], vec![0; 128]);
    let e = case.shard(SINGLE_FILE, |t| t.push(extra.clone())).err();
    assert_import(&e, SINGLE_FILE, &["unexpected tensor `gpt_neox.layers.0.attention.dense.bias`"]);
    let case = Case::new(SHARDED);
    let extra = Raw::new("model.layers.0.self_attn.q_proj.bias", Dtype::F16, &[64], vec![0; 128]);
    let e = case.shard(SHARD3, |t| t.push(extra.clone())).err();
    assert_import(&e, SHARD3, &["unexpected tensor `model.layers.0.self_attn.q_proj.bias`"]);
    // Buffers that are not parameters are ignored, as transformers ignores them.
    let case = Case::new("gpt2");
    let buffer = Raw::new("transformer.h.0.attn.bias", Dtype::F32, &[1, 1, 4, 4], vec![0; 64]);
    case.shard(SINGLE_FILE, |t| t.push(buffer.clone())).import().expect("attn.bias buffer ignored");
}

#[test]
fn misshapen_tensor_names_the_file_the_tensor_and_both_shapes() {
    // The config says one size, the tensors another.
    let e = Case::new("gpt2-untied-inner").set("n_inner", json!(48)).err();
    assert_import(
        &e,
        SINGLE_FILE,
        &["tensor `transformer.h.0.mlp.c_fc.weight` has shape [32, 40]", "[32, 48]"],
    );
    let e = Case::new("llama-gqa-untied").set("vocab_size", json!(97)).err();
    assert_import(&e, SINGLE_FILE, &["tensor `model.embed_tokens.weight` has shape [96, 32]", "[97, 32]"]);
    let e = Case::new("llama-gqa-untied").set("num_key_value_heads", json!(4)).err();
    assert_import(&e, SINGLE_FILE, &["tensor `model.layers.0.self_attn.k_proj.weight` has shape [16, 32]"]);
    let e = Case::new("bloom-6-heads").set("hidden_size", json!(54)).err();
    assert_import(
        &e,
        SINGLE_FILE,
        &["tensor `transformer.word_embeddings.weight` has shape [96, 48]", "[96, 54]"],
    );
    // The tensor is rewritten with another shape (same bytes).
    let case = Case::new(SHARDED);
    let e = case
        .shard(SHARD1, |ts| {
            let t = ts.iter_mut().find(|t| t.name == "model.layers.0.mlp.up_proj.weight").expect("tensor");
            t.shape = vec![t.shape[1], t.shape[0]];
        })
        .err();
    assert_import(&e, SHARD1, &["tensor `model.layers.0.mlp.up_proj.weight` has shape [32, 48]", "[48, 32]"]);
    let case = Case::new("neox-partial-parallel");
    let e = case
        .shard(SINGLE_FILE, |ts| {
            let t = ts
                .iter_mut()
                .find(|t| t.name == "gpt_neox.layers.1.attention.query_key_value.bias")
                .expect("t");
            t.shape = vec![1, 96];
        })
        .err();
    assert_import(&e, SINGLE_FILE, &["`gpt_neox.layers.1.attention.query_key_value.bias` has shape [1, 96]"]);
}

#[test]
fn non_float_dtypes_and_non_finite_values_name_the_tensor() {
    for (dtype, size) in [(Dtype::I64, 8), (Dtype::U8, 1), (Dtype::BOOL, 1), (Dtype::F64, 8), (Dtype::I32, 4)]
    {
        let case = Case::new("gpt2");
        let e = case
            .shard(SINGLE_FILE, |ts| {
                let t = ts.iter_mut().find(|t| t.name == "transformer.h.1.ln_2.weight").expect("tensor");
                (t.dtype, t.data) = (dtype, vec![0; 32 * size]);
            })
            .err();
        assert_import(
            &e,
            SINGLE_FILE,
            &["tensor `transformer.h.1.ln_2.weight`", &format!("dtype {dtype:?}"), "F32, F16 or BF16"],
        );
    }
    // F32 NaN, F16 +inf, BF16 −inf, F16 NaN, at a known flat index.
    let case = Case::new("gpt2");
    let e = case.shard(SINGLE_FILE, put("transformer.wte.weight", 5, &f32::NAN.to_le_bytes())).err();
    assert_import(
        &e,
        SINGLE_FILE,
        &["tensor `transformer.wte.weight` has a non-finite value at flat index 5"],
    );
    let case = Case::new("bloom-4-heads-f16");
    let name = "transformer.h.0.mlp.dense_h_to_4h.weight";
    let e = case.shard(SINGLE_FILE, put(name, 77, &0x7c00u16.to_le_bytes())).err();
    assert_import(&e, SINGLE_FILE, &[&format!("tensor `{name}` has a non-finite value at flat index 77")]);
    let case = Case::new("llama-mqa-bias-llama3-bf16");
    let name = "model.layers.1.self_attn.v_proj.bias";
    let e = case.shard(SINGLE_FILE, put(name, 3, &0xff80u16.to_le_bytes())).err();
    assert_import(&e, SINGLE_FILE, &[&format!("tensor `{name}` has a non-finite value at flat index 3")]);
    let case = Case::new(SHARDED);
    let name = "lm_head.weight";
    let e = case.shard(SHARD3, put(name, 0, &0xfe00u16.to_le_bytes())).err();
    assert_import(&e, SHARD3, &["tensor `lm_head.weight` has a non-finite value at flat index 0"]);
}

/// Overwrite value `index` of tensor `name` with `bytes` (one value).
fn put<'a>(name: &'a str, index: usize, bytes: &'a [u8]) -> impl FnOnce(&mut Vec<Raw>) + 'a {
    move |ts: &mut Vec<Raw>| {
        let t = ts.iter_mut().find(|t| t.name == name).unwrap_or_else(|| panic!("no tensor {name}"));
        t.data[index * bytes.len()..(index + 1) * bytes.len()].copy_from_slice(bytes);
    }
}

#[test]
fn truncated_shards_name_the_file() {
    let bytes = std::fs::read(fixture("gpt2").join(SINGLE_FILE)).expect("fixture");
    for cut in [0, 7, 8, 9, 100, bytes.len() / 2, bytes.len() - 1] {
        let e = Case::new("gpt2").write(SINGLE_FILE, &bytes[..cut]).err();
        assert_import(&e, SINGLE_FILE, &["not a readable safetensors file"]);
    }
    let bytes = std::fs::read(fixture(SHARDED).join(SHARD2)).expect("fixture");
    let e = Case::new(SHARDED).write(SHARD2, &bytes[..bytes.len() - 2]).err();
    assert_import(&e, SHARD2, &["not a readable safetensors file"]);
}

#[test]
fn sharded_index_problems_name_the_index_or_the_shard() {
    // A shard the index names is not there.
    let e = Case::new(SHARDED).remove(SHARD2).err();
    let msg = e.to_string();
    assert!(matches!(&e, Error::Io { path, .. } if path.ends_with(SHARD2)), "{e:?}");
    assert!(msg.contains(SHARD2), "{msg}");
    // The index says the wrong shard (both shards are read).
    let e = Case::new(SHARDED).index(|m| m["model.embed_tokens.weight"] = json!(SHARD2)).err();
    assert_import(&e, INDEX_FILE, &["tensor `model.embed_tokens.weight` is in", SHARD1, SHARD2]);
    // The index moves the only tensor of shard 3 to shard 1: shard 3 is not read at all.
    let e = Case::new(SHARDED).index(|m| m["lm_head.weight"] = json!(SHARD1)).err();
    assert_import(&e, SHARD1, &["tensor `lm_head.weight`", "missing"]);
    // The index names a shard file that does not exist.
    let e =
        Case::new(SHARDED).index(|m| m["lm_head.weight"] = json!("model-00004-of-00003.safetensors")).err();
    assert!(
        matches!(&e, Error::Io { path, .. } if path.ends_with("model-00004-of-00003.safetensors")),
        "{e:?}"
    );
    // Path-like or non-safetensors file names are refused before anything is read.
    for bad in [
        "../x.safetensors",
        "/etc/x.safetensors",
        "sub/x.safetensors",
        "..\\x.safetensors",
        ".safetensors",
        "x.bin",
        "",
    ] {
        let e = Case::new(SHARDED).index(|m| m["model.norm.weight"] = json!(bad)).err();
        assert_import(&e, INDEX_FILE, &["weight_map[`model.norm.weight`]", &format!("`{bad}`")]);
        assert!(hf::shard_files(Some(&json!({"weight_map": {"t": bad}}).to_string())).is_err(), "{bad}");
    }
    let e = Case::new(SHARDED).index(|m| m["model.norm.weight"] = json!(2)).err();
    assert_import(&e, INDEX_FILE, &["weight_map[`model.norm.weight`] is not a string"]);
    let e = Case::new(SHARDED).index(|m| m.clear()).err();
    assert_import(&e, INDEX_FILE, &["`weight_map` is empty"]);
    let e = Case::new(SHARDED).write(INDEX_FILE, b"{\"weight_map\": {\"a\": ").err();
    assert_import(&e, INDEX_FILE, &["not valid JSON"]);
    let e = Case::new(SHARDED).write(INDEX_FILE, b"{\"metadata\": {}}").err();
    assert_import(&e, INDEX_FILE, &["no `weight_map`"]);
}

#[test]
fn a_tensor_in_two_shards_names_both() {
    let case = Case::new(SHARDED);
    let head =
        read_tensors(&case.read(SHARD3)).into_iter().find(|t| t.name == "lm_head.weight").expect("lm_head");
    let e = case.shard(SHARD1, |t| t.push(head.clone())).err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Import { .. }), "{e:?}");
    for n in ["tensor `lm_head.weight` appears in more than one shard", SHARD1, SHARD3] {
        assert!(msg.contains(n), "`{msg}` does not name {n}");
    }
    // In memory: the same shard given twice under two names.
    let dir = fixture("gpt2");
    let config = std::fs::read_to_string(dir.join("config.json")).expect("config");
    let bytes = std::fs::read(dir.join(SINGLE_FILE)).expect("shard");
    let shards = vec![("a.safetensors".to_string(), bytes.clone()), ("b.safetensors".to_string(), bytes)];
    let e = hf::import(&config, None, shards, ImportOptions::default()).expect_err("duplicate tensors");
    assert_import(&e, "b.safetensors", &["appears in more than one shard", "a.safetensors"]);
}

// ---- Random mutations of config and index text: `hf::import` returns, never panics. ----

/// Every fixture's (config text, index text, shards), read once.
type Loaded = (String, Option<String>, Vec<(String, Vec<u8>)>);

fn loaded() -> &'static [(String, Loaded)] {
    static ALL: OnceLock<Vec<(String, Loaded)>> = OnceLock::new();
    ALL.get_or_init(|| {
        common::hf_fixtures()
            .into_iter()
            .map(|dir| {
                let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let config = std::fs::read_to_string(dir.join("config.json")).expect("config");
                let index = std::fs::read_to_string(dir.join(INDEX_FILE)).ok();
                let shards = hf::shard_files(index.as_deref())
                    .expect("fixture index")
                    .into_iter()
                    .map(|f| {
                        let bytes = std::fs::read(dir.join(&f)).expect("shard");
                        (f, bytes)
                    })
                    .collect();
                (name, (config, index, shards))
            })
            .collect()
    })
}

/// Import, and when that succeeds run one token through the model: neither may panic.
fn import_never_panics(config: &str, index: Option<&str>, shards: &[(String, Vec<u8>)]) {
    if let Ok(imported) = hf::import(config, index, shards.to_vec(), ImportOptions::default()) {
        let model = Model::new(imported.config, imported.weights).expect("an imported model validates");
        let _ = model.session().prefill(&[0]);
    }
}

/// JSON values that probe the type and range checks (and shard names for the index).
fn hostile_value() -> impl Strategy<Value = Value> {
    let fixed = vec![
        json!(0),
        json!(-1),
        json!(1),
        json!(2),
        json!(3),
        json!(7),
        json!(64),
        json!(1_000_000_000u64),
        json!(1u64 << 40),
        json!(1u64 << 62),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(0.5),
        json!(1e300),
        json!(-0.0),
        json!("32"),
        json!(""),
        json!("linear"),
        json!("yarn"),
        json!("gelu"),
        Value::Null,
        json!(true),
        json!(false),
        json!([]),
        json!({}),
        json!(["LlamaForCausalLM"]),
        json!(["GPT2LMHeadModel"]),
        json!(["BloomForCausalLM"]),
        json!(["GPTNeoXForCausalLM"]),
        json!({"rope_type": "linear", "factor": 0.0}),
        json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0}),
        json!({"type": "linear", "factor": 2.0}),
        json!({"rope_theta": -1.0, "partial_rotary_factor": 0.5}),
        json!(SHARD1),
        json!(SHARD3),
        json!("../x.safetensors"),
    ];
    prop_oneof![
        6 => prop::sample::select(fixed),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => (-4.0f64..4.0).prop_map(|x| json!(x)),
    ]
}

/// Keys the importers read, beyond those already in a fixture's config.
const KEYS: &[&str] = &[
    "architectures",
    "hidden_size",
    "n_embd",
    "n_embed",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "num_hidden_layers",
    "n_layer",
    "head_dim",
    "intermediate_size",
    "n_inner",
    "vocab_size",
    "max_position_embeddings",
    "n_positions",
    "seq_length",
    "rope_theta",
    "rotary_emb_base",
    "rotary_pct",
    "partial_rotary_factor",
    "rope_parameters",
    "rope_scaling",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "use_parallel_residual",
    "hidden_act",
    "activation_function",
    "rms_norm_eps",
    "layer_norm_eps",
    "layer_norm_epsilon",
    "_name_or_path",
];

/// One edit of a JSON document's text.
#[derive(Debug, Clone)]
enum Mutation {
    /// Cut the text at this fraction of its length.
    Truncate(f64),
    /// Replace `len` bytes at this fraction of the length with `text`.
    Splice(f64, usize, String),
    /// Set key number `k` (of the document's own keys followed by [`KEYS`]) to a value, at the top
    /// level or inside `rope_parameters` / `weight_map`.
    Set(usize, Value),
    /// Remove key number `k`.
    Remove(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    // Mostly structural edits: text edits mostly give invalid JSON, refused at once.
    prop_oneof![
        1 => (0.0f64..1.0).prop_map(Mutation::Truncate),
        2 => (0.0f64..1.0, 0usize..8, "[-0-9a-z\"{}\\[\\],:. eE+]{0,8}")
            .prop_map(|(at, n, s)| Mutation::Splice(at, n, s)),
        5 => (0usize..128, hostile_value()).prop_map(|(k, v)| Mutation::Set(k, v)),
        1 => (0usize..128).prop_map(Mutation::Remove),
    ]
}

/// Byte offset at `frac` of `text`, moved back to a char boundary.
fn boundary(text: &str, frac: f64) -> usize {
    let mut at = ((text.len() as f64 * frac) as usize).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Apply `m` to `text`; structural edits apply to the object at `nested` if there is one.
fn mutate(text: &str, m: &Mutation, nested: &[&str]) -> String {
    match m {
        Mutation::Truncate(f) => text[..boundary(text, *f)].to_string(),
        Mutation::Splice(f, n, s) => {
            let at = boundary(text, *f);
            let mut end = (at + n).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            format!("{}{s}{}", &text[..at], &text[end..])
        }
        Mutation::Set(k, _) | Mutation::Remove(k) => {
            let Ok(Value::Object(mut doc)) = serde_json::from_str::<Value>(text) else {
                return text.to_string();
            };
            // Half of the keys address the nested object (rope_parameters / weight_map) when present.
            let inner = nested.iter().find(|n| doc.get(**n).is_some_and(Value::is_object)).copied();
            let target = match (inner, k % 2) {
                (Some(n), 1) => doc.get_mut(n).and_then(Value::as_object_mut).expect("nested object"),
                _ => &mut doc,
            };
            let mut keys: Vec<String> = target.keys().cloned().collect();
            keys.extend(KEYS.iter().map(|s| s.to_string()));
            let key = keys[(k / 2) % keys.len()].clone();
            if let Mutation::Set(_, v) = m {
                target.insert(key, v.clone());
            } else {
                target.remove(&key);
            }
            Value::Object(doc).to_string()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    /// Mutated `config.json` text of any fixture: `hf::import` returns Ok or Err.
    #[test]
    fn mutated_config_text_never_panics(which in 0usize..64, edits in prop::collection::vec(mutation(), 1..4)) {
        let all = loaded();
        let (_, (config, index, shards)) = &all[which % all.len()];
        let mut text = config.clone();
        for m in &edits {
            text = mutate(&text, m, &["rope_parameters", "rope_scaling"]);
        }
        import_never_panics(&text, index.as_deref(), shards);
    }

    /// Mutated index text of the sharded fixture (and its config with it, sometimes).
    #[test]
    fn mutated_index_text_never_panics(
        edits in prop::collection::vec(mutation(), 1..4),
        config_edit in prop::option::of(mutation()),
    ) {
        let all = loaded();
        let (_, (config, index, shards)) = all.iter().find(|(n, _)| n == SHARDED).expect("sharded fixture");
        let mut text = index.clone().expect("index");
        for m in &edits {
            text = mutate(&text, m, &["weight_map"]);
        }
        let config = config_edit.map_or_else(|| config.clone(), |m| mutate(config, &m, &["rope_parameters"]));
        import_never_panics(&config, Some(&text), shards);
    }
}
