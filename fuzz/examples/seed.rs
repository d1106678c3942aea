//! Writes the seed corpora of the four fuzz targets (small, valid inputs) into
//! `fuzz/corpus/<target>/` (gitignored). Deterministic: run it again to regenerate.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example seed [-- OUT_DIR]
//!
//! OUT_DIR defaults to the `corpus` folder next to this crate's Cargo.toml.

use attnlab_core::config::{AbsolutePosition, FfnKind, NormKind, SizePreset, VARIANT_IDS};
use attnlab_core::tokenizer::{Tokenizer, INIT_CORPUS};
use attnlab_core::variants::lrpe::{LrpeCore, LrpeNormalize, LrpeP, LrpeSpec, LrpeTheta};
use attnlab_core::variants::transnormer::{Transnormer, TransnormerFlavor, TransnormerRole};
use attnlab_core::variants::{
    alibi::Alibi, fire::Fire, gla::Gla, mep::Mep, mep_param::MepParam, retnet::Retnet, rope::Rope,
    sandwich::Sandwich, sinusoidal::Sinusoidal, t5::T5, KernelKind, KernelTerm,
};
use attnlab_core::weights::{StorageDtype, Tensor, Weights};
use attnlab_core::{hf, AttentionSpec, Model, ModelConfig};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

static WRITTEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("create corpus dir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
    WRITTEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    BYTES.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed);
}

/// Valid configs: every catalog preset at tiny sizes, plus the sub-options and hybrids that
/// exercise other parts of the schema and of `validate()`.
fn configs() -> Vec<(String, ModelConfig)> {
    let tiny = attnlab_fuzz::tiny_sizes();
    let mut out: Vec<(String, ModelConfig)> = VARIANT_IDS
        .iter()
        .map(|id| (id.to_string(), ModelConfig::preset(id, tiny).expect("preset")))
        .collect();
    let preset = |id: &str| ModelConfig::preset(id, tiny).expect("preset");

    let mut c = preset("transnormer");
    c.layers = [TransnormerRole::Diag, TransnormerRole::Norm]
        .map(|role| {
            AttentionSpec::Transnormer(Transnormer { flavor: TransnormerFlavor::T1, role, block_size: 4 })
        })
        .to_vec();
    out.push(("transnormer-t1".into(), c));

    let mut c = preset("lrpe");
    c.layers = vec![
        AttentionSpec::Lrpe(LrpeSpec {
            core: LrpeCore::Permutation,
            p: LrpeP::OddEven,
            theta: LrpeTheta::Fixed,
            normalize: LrpeNormalize::Denominator,
            seed: 7,
        }),
        AttentionSpec::Lrpe(LrpeSpec {
            core: LrpeCore::Complex,
            p: LrpeP::Identity,
            theta: LrpeTheta::Learned,
            normalize: LrpeNormalize::Rmsnorm,
            seed: 3,
        }),
    ];
    out.push(("lrpe-options".into(), c));

    let mut c = preset("mep");
    c.layers = vec![
        AttentionSpec::Mep(Mep {
            kernels: vec![
                KernelTerm { kernel: KernelKind::KerpleLog, scale: 2.0, weight: 0.5, p: Some(1.5) },
                KernelTerm { kernel: KernelKind::KerplePower, scale: 1.0, weight: 0.25, p: Some(0.5) },
            ],
            slopes: Some(vec![0.5, 0.25]),
        }),
        AttentionSpec::Alibi(Alibi { slopes: Some(vec![1.0, 0.0]) }),
    ];
    out.push(("mep-kernels-hybrid".into(), c));

    let mut c = preset("sinusoidal");
    c.layers = vec![
        AttentionSpec::Sinusoidal(Sinusoidal {}),
        AttentionSpec::T5(T5 { num_buckets: 8, max_distance: 16 }),
    ];
    c.norm.kind = NormKind::Layernorm;
    c.ffn.kind = FfnKind::Gelu;
    c.tie_embeddings = false;
    out.push(("sinusoidal-t5-layernorm-gelu-untied".into(), c));

    let mut c = preset("gla");
    c.layers = vec![
        AttentionSpec::Gla(Gla { gate_rank: 2, gate_logit_normalizer: 8.0 }),
        AttentionSpec::Sandwich(Sandwich { dbar: Some(4) }),
    ];
    out.push(("gla-sandwich".into(), c));

    let mut c = preset("rope");
    c.layers = vec![
        AttentionSpec::Rope(Rope { base: 500.0, rotary_dim: Some(2), scaling: None }),
        AttentionSpec::Fire(Fire { init_l: Some(4.0) }),
    ];
    c.absolute_position = AbsolutePosition::Sinusoidal;
    out.push(("rope-fire-abspos".into(), c));

    let mut c = ModelConfig::preset(
        "linear-elu",
        SizePreset { n_layers: 3, n_heads: 3, head_dim: 3, d_model: 6, ..tiny },
    )
    .expect("preset");
    c.layers[1] =
        AttentionSpec::MepParam(MepParam { kerple_weight: 0.0, gaussian_weight: 1.0, gaussian_scale: 2.0 });
    c.layers[2] = AttentionSpec::Retnet(Retnet {});
    c.head_dim = 4; // retnet needs an even head_dim
    out.push(("linear-elu-mep-param-retnet".into(), c));

    for (name, cfg) in &out {
        cfg.validate().unwrap_or_else(|e| panic!("seed config {name} is invalid: {e}"));
    }
    out
}

/// Hand-written tokenizer.json documents for the other `tokenizers` models and components.
const TOKENIZER_JSONS: &[(&str, &str)] = &[
    (
        "wordlevel-whitespace-lowercase.json",
        r###"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":0,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"normalizer":{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Lowercase"}]},"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,"model":{"type":"WordLevel","vocab":{"[UNK]":0,"hello":1,"world":2,",":3,"!":4,"the":5,"cat":6},"unk_token":"[UNK]"}}"###,
    ),
    (
        "wordpiece-bert.json",
        r###"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":0,"content":"[UNK]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"normalizer":{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true},"pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":null,"decoder":{"type":"WordPiece","prefix":"##","cleanup":true},"model":{"type":"WordPiece","unk_token":"[UNK]","continuing_subword_prefix":"##","max_input_chars_per_word":100,"vocab":{"[UNK]":0,"h":1,"##e":2,"##l":3,"##o":4,"the":5,"c":6,"##at":7}}}"###,
    ),
    (
        "unigram-metaspace.json",
        r###"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":{"type":"NFKC"},"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true},"post_processor":null,"decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true},"model":{"type":"Unigram","unk_id":0,"vocab":[["<unk>",0.0],["▁",-1.0],["a",-2.0],["b",-2.5],["▁the",-1.5],["c",-3.0]],"byte_fallback":false}}"###,
    ),
    (
        "bpe-byte-fallback-split.json",
        r###"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+|\\d"},"behavior":"Isolated","invert":false},"post_processor":null,"decoder":{"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Fuse"}]},"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":true,"ignore_merges":false,"vocab":{"<0x00>":0,"<0x41>":1,"a":2,"b":3,"ab":4,"▁":5},"merges":["a b"]}}"###,
    ),
    (
        "wordlevel-fixedlength-template.json",
        r###"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[{"id":3,"content":"[CLS]","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],"normalizer":{"type":"Strip","strip_left":true,"strip_right":true},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"FixedLength","length":3}]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"[CLS]","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],"special_tokens":{"[CLS]":{"id":"[CLS]","ids":[3],"tokens":["[CLS]"]}}},"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"_"},"content":" "},{"type":"Fuse"}]},"model":{"type":"WordLevel","vocab":{"[UNK]":0,"hel":1,"lo":2,"[CLS]":3,"wor":4,"ld":5},"unk_token":"[UNK]"}}"###,
    ),
    (
        "wordlevel-strip-decoder.json",
        r###"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":{"type":"Strip","content":"x","start":1,"stop":0},"model":{"type":"WordLevel","vocab":{"[UNK]":0,"hello":1,"world":2},"unk_token":"[UNK]"}}"###,
    ),
];

/// A tiny Hugging Face checkpoint in the image of a fixture of `crates/core/tests/fixtures/hf/`:
/// its `config.json` with the sizes shrunk (1 layer, width 8, vocabulary 16; its options kept), and
/// seeded random tensors under the architecture's names, stored in the fixture's dtype.
/// Returns the config text, the shard bytes and the tensor names.
fn tiny_hf_checkpoint(fixture: &Path) -> (String, Vec<u8>, Vec<String>) {
    let text = std::fs::read_to_string(fixture.join("config.json")).expect("fixture config");
    let mut c: Value = serde_json::from_str(&text).expect("fixture config JSON");
    let arch = c["architectures"][0].as_str().expect("architectures").to_string();
    let flag = |c: &Value, key: &str, default: bool| c.get(key).and_then(Value::as_bool).unwrap_or(default);
    let (v, d, layers) = (16usize, 8usize, 1usize);
    let mut t: Vec<(String, Vec<usize>)> = Vec::new();
    let mut add = |name: String, shape: &[usize]| t.push((name, shape.to_vec()));
    match arch.as_str() {
        "LlamaForCausalLM" => {
            // Keep GQA/MQA and a head_dim that is not hidden / heads where the fixture has them.
            let (heads, kv) = (2, if c["num_key_value_heads"] == c["num_attention_heads"] { 2 } else { 1 });
            let explicit =
                c["head_dim"].as_u64().zip(c["hidden_size"].as_u64()).zip(c["num_attention_heads"].as_u64());
            let dh = match explicit {
                Some(((h, d0), n)) if h * n != d0 => 8,
                _ => 4,
            };
            let i = 8;
            for (k, val) in [
                ("hidden_size", d),
                ("num_attention_heads", heads),
                ("num_key_value_heads", kv),
                ("head_dim", dh),
                ("intermediate_size", i),
                ("num_hidden_layers", layers),
                ("vocab_size", v),
                ("max_position_embeddings", 16),
            ] {
                c[k] = json!(val);
            }
            let (ab, mb) = (flag(&c, "attention_bias", false), flag(&c, "mlp_bias", false));
            add("model.embed_tokens.weight".into(), &[v, d]);
            add("model.norm.weight".into(), &[d]);
            if !flag(&c, "tie_word_embeddings", false) {
                add("lm_head.weight".into(), &[v, d]);
            }
            for l in 0..layers {
                let p = format!("model.layers.{l}.");
                add(format!("{p}input_layernorm.weight"), &[d]);
                add(format!("{p}post_attention_layernorm.weight"), &[d]);
                for (m, rows, inp, bias) in [
                    ("self_attn.q_proj", heads * dh, d, ab),
                    ("self_attn.k_proj", kv * dh, d, ab),
                    ("self_attn.v_proj", kv * dh, d, ab),
                    ("self_attn.o_proj", d, heads * dh, ab),
                    ("mlp.gate_proj", i, d, mb),
                    ("mlp.up_proj", i, d, mb),
                    ("mlp.down_proj", d, i, mb),
                ] {
                    add(format!("{p}{m}.weight"), &[rows, inp]);
                    if bias {
                        add(format!("{p}{m}.bias"), &[rows]);
                    }
                }
            }
        }
        "GPTNeoXForCausalLM" => {
            // One head of 8: partial rotary fractions of 1/4 and 1/2 stay whole, even channels.
            let i = 8;
            for (k, val) in [
                ("hidden_size", d),
                ("num_attention_heads", 1),
                ("intermediate_size", i),
                ("num_hidden_layers", layers),
                ("vocab_size", v),
                ("max_position_embeddings", 16),
            ] {
                c[k] = json!(val);
            }
            let ab = flag(&c, "attention_bias", true);
            add("gpt_neox.embed_in.weight".into(), &[v, d]);
            add("gpt_neox.final_layer_norm.weight".into(), &[d]);
            add("gpt_neox.final_layer_norm.bias".into(), &[d]);
            if !flag(&c, "tie_word_embeddings", false) {
                add("embed_out.weight".into(), &[v, d]);
            }
            for l in 0..layers {
                let p = format!("gpt_neox.layers.{l}.");
                for n in ["input_layernorm", "post_attention_layernorm"] {
                    add(format!("{p}{n}.weight"), &[d]);
                    add(format!("{p}{n}.bias"), &[d]);
                }
                for (m, rows, inp, bias) in [
                    ("attention.query_key_value", 3 * d, d, ab),
                    ("attention.dense", d, d, ab),
                    ("mlp.dense_h_to_4h", i, d, true),
                    ("mlp.dense_4h_to_h", d, i, true),
                ] {
                    add(format!("{p}{m}.weight"), &[rows, inp]);
                    if bias {
                        add(format!("{p}{m}.bias"), &[rows]);
                    }
                }
            }
        }
        "BloomForCausalLM" => {
            for (k, val) in [("hidden_size", d), ("n_head", 2), ("n_layer", layers), ("vocab_size", v)] {
                c[k] = json!(val);
            }
            let p0 = "transformer.";
            add(format!("{p0}word_embeddings.weight"), &[v, d]);
            for n in ["word_embeddings_layernorm", "ln_f"] {
                add(format!("{p0}{n}.weight"), &[d]);
                add(format!("{p0}{n}.bias"), &[d]);
            }
            if !flag(&c, "tie_word_embeddings", true) {
                add("lm_head.weight".into(), &[v, d]);
            }
            for l in 0..layers {
                let p = format!("{p0}h.{l}.");
                for n in ["input_layernorm", "post_attention_layernorm"] {
                    add(format!("{p}{n}.weight"), &[d]);
                    add(format!("{p}{n}.bias"), &[d]);
                }
                for (m, rows, inp) in [
                    ("self_attention.query_key_value", 3 * d, d),
                    ("self_attention.dense", d, d),
                    ("mlp.dense_h_to_4h", 4 * d, d),
                    ("mlp.dense_4h_to_h", d, 4 * d),
                ] {
                    add(format!("{p}{m}.weight"), &[rows, inp]);
                    add(format!("{p}{m}.bias"), &[rows]);
                }
            }
        }
        "GPT2LMHeadModel" => {
            let positions = 8;
            let inner = if c["n_inner"].is_null() { 4 * d } else { 12 };
            for (k, val) in [
                ("n_embd", d),
                ("n_head", 2),
                ("n_layer", layers),
                ("n_positions", positions),
                ("vocab_size", v),
            ] {
                c[k] = json!(val);
            }
            if !c["n_inner"].is_null() {
                c["n_inner"] = json!(inner);
            }
            let p0 = "transformer.";
            add(format!("{p0}wte.weight"), &[v, d]);
            add(format!("{p0}wpe.weight"), &[positions, d]);
            add(format!("{p0}ln_f.weight"), &[d]);
            add(format!("{p0}ln_f.bias"), &[d]);
            if !flag(&c, "tie_word_embeddings", true) {
                add("lm_head.weight".into(), &[v, d]);
            }
            for l in 0..layers {
                let p = format!("{p0}h.{l}.");
                for n in ["ln_1", "ln_2"] {
                    add(format!("{p}{n}.weight"), &[d]);
                    add(format!("{p}{n}.bias"), &[d]);
                }
                // Conv1D weights are [in, out].
                for (m, inp, out) in [
                    ("attn.c_attn", d, 3 * d),
                    ("attn.c_proj", d, d),
                    ("mlp.c_fc", d, inner),
                    ("mlp.c_proj", inner, d),
                ] {
                    add(format!("{p}{m}.weight"), &[inp, out]);
                    add(format!("{p}{m}.bias"), &[out]);
                }
            }
        }
        other => panic!("fixture architecture {other} has no tiny seed"),
    }
    let dtype = match c["dtype"].as_str() {
        Some("float16") => StorageDtype::F16,
        Some("bfloat16") => StorageDtype::Bf16,
        _ => StorageDtype::F32,
    };
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let names = t.iter().map(|(n, _)| n.clone()).collect();
    let tensors = t
        .into_iter()
        .map(|(name, shape)| {
            let data = (0..shape.iter().product::<usize>())
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let r = ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5;
                    if name.ends_with("norm.weight")
                        || name.ends_with("ln_f.weight")
                        || name.contains(".ln_") && name.ends_with(".weight")
                    {
                        1.0 + r
                    } else {
                        r
                    }
                })
                .collect();
            (name, Tensor { shape, data })
        })
        .collect();
    let bytes = Weights { tensors }
        .to_safetensors_as(dtype, Some(HashMap::from([("format".to_string(), "pt".to_string())])))
        .expect("serialize");
    (serde_json::to_string_pretty(&c).expect("config JSON"), bytes, names)
}

/// An index putting every tensor of `shard` into `file`.
fn one_shard_index(names: &[String], size: usize, file: &str) -> String {
    let map: serde_json::Map<String, Value> = names.iter().map(|n| (n.clone(), json!(file))).collect();
    serde_json::to_string_pretty(&json!({"metadata": {"total_size": size}, "weight_map": map}))
        .expect("index JSON")
}

fn main() {
    let out: PathBuf = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"));

    // fuzz_config: pretty (as `attnlab init` writes it) and compact JSON of each config.
    let dir = out.join("fuzz_config");
    let configs = configs();
    for (name, cfg) in &configs {
        write(&dir, &format!("{name}.json"), cfg.to_json().as_bytes());
    }
    let compact = serde_compact(&configs[3].1.to_json());
    write(&dir, "alibi-compact.json", compact.as_bytes());

    // fuzz_safetensors: the fixed alibi config's weights (with and without metadata), plus files
    // of other tiny variants (they fail the fixed config's checks, but add structure to mutate).
    let dir = out.join("fuzz_safetensors");
    let model = Model::random(attnlab_fuzz::safetensors_config().clone(), 0).expect("tiny alibi model");
    let plain = model.weights().to_safetensors(None).expect("serialize");
    Model::from_bytes(attnlab_fuzz::safetensors_config_json(), &plain).expect("seed model loads");
    write(&dir, "alibi-tiny.safetensors", &plain);
    let meta = HashMap::from([("format".to_string(), "attnlab".to_string())]);
    write(
        &dir,
        "alibi-tiny-meta.safetensors",
        &model.weights().to_safetensors(Some(meta)).expect("serialize"),
    );
    for id in ["kerple-log", "t5", "nope"] {
        let m = Model::random(ModelConfig::preset(id, attnlab_fuzz::tiny_sizes()).expect("preset"), 1)
            .expect("tiny model");
        write(&dir, &format!("{id}-tiny.safetensors"), &m.weights().to_safetensors(None).expect("serialize"));
    }

    // fuzz_tokenizer: byte-level BPEs trained like `attnlab init` does (smaller vocabularies), and
    // hand-written documents for the other models.
    let dir = out.join("fuzz_tokenizer");
    let bpe = Tokenizer::train_byte_bpe(INIT_CORPUS, 300).expect("train");
    write(&dir, "bytelevel-bpe-300.json", bpe.to_json().expect("json").as_bytes());
    let small =
        Tokenizer::train_byte_bpe("the cat sat on the mat.\nthe dog sat on the log.\n", 270).expect("train");
    write(&dir, "bytelevel-bpe-270.json", serde_compact(&small.to_json().expect("json")).as_bytes());
    for (name, json) in TOKENIZER_JSONS {
        Tokenizer::from_bytes(json.as_bytes()).unwrap_or_else(|e| panic!("seed {name} does not load: {e}"));
        write(&dir, name, json.as_bytes());
    }

    // fuzz_hf: a tiny checkpoint in the image of every importer fixture (sizes shrunk, options
    // kept), as a single file and with a one-shard index; and the sharded fixture's own config and
    // index with its smallest shard (it fails: the other two shards are absent).
    let dir = out.join("fuzz_hf");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/core/tests/fixtures/hf");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&fixtures)
        .expect("fixtures of crates/core/tests/fixtures/hf")
        .filter_map(|e| e.ok().map(|e| e.path()).filter(|p| p.is_dir()))
        .collect();
    names.sort();
    for fixture in &names {
        let name = fixture.file_name().expect("name").to_string_lossy().into_owned();
        let (config, shard, tensors) = tiny_hf_checkpoint(fixture);
        let file = "model-00001-of-00001.safetensors";
        let index = one_shard_index(&tensors, shard.len(), file);
        for (seed, index, file) in [
            (format!("{name}.bin"), None, hf::SINGLE_FILE),
            (format!("{name}-indexed.bin"), Some(index), file),
        ] {
            let shards = [(file.to_string(), shard.clone())];
            hf::import(&config, index.as_deref(), &shards, hf::ImportOptions::default())
                .unwrap_or_else(|e| panic!("seed {seed} does not import: {e}"));
            write(&dir, &seed, &attnlab_fuzz::hf_join(&config, index.as_deref(), &shard));
        }
        if fixture.join(hf::INDEX_FILE).exists() {
            let read = |f: &str| std::fs::read(fixture.join(f)).expect("fixture file");
            let text = |f: &str| String::from_utf8(read(f)).expect("fixture text");
            let seed = attnlab_fuzz::hf_join(
                &text("config.json"),
                Some(&text(hf::INDEX_FILE)),
                &read("model-00003-of-00003.safetensors"),
            );
            write(&dir, &format!("{name}-real-shard3.bin"), &seed);
        }
    }

    println!(
        "wrote {} seed files ({} bytes) under {}",
        WRITTEN.load(std::sync::atomic::Ordering::Relaxed),
        BYTES.load(std::sync::atomic::Ordering::Relaxed),
        out.display()
    );
}

/// Drop the pretty-printing whitespace of a JSON document (outside strings).
fn serde_compact(pretty: &str) -> String {
    let mut s = String::with_capacity(pretty.len());
    let mut in_str = false;
    let mut esc = false;
    for ch in pretty.chars() {
        if in_str {
            s.push(ch);
            if esc {
                esc = false;
            } else if ch == '\\' {
                esc = true;
            } else if ch == '"' {
                in_str = false;
            }
        } else if ch == '"' {
            in_str = true;
            s.push(ch);
        } else if !ch.is_whitespace() {
            s.push(ch);
        }
    }
    s
}
