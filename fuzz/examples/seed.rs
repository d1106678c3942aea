//! Writes the seed corpora of the three fuzz targets (small, valid inputs) into
//! `fuzz/corpus/<target>/` (gitignored). Deterministic: run it again to regenerate.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example seed [-- OUT_DIR]
//!
//! OUT_DIR defaults to the `corpus` folder next to this crate's Cargo.toml.

use attnlab_core::config::{
    AbsolutePosition, FfnKind, KernelKind, KernelTerm, LrpeCore, LrpeNormalize, LrpeP, LrpeTheta, NormKind,
    SizePreset, TransnormerFlavor, TransnormerRole, VARIANT_IDS,
};
use attnlab_core::tokenizer::{Tokenizer, INIT_CORPUS};
use attnlab_core::{AttentionSpec, Model, ModelConfig};
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
    c.layers = vec![
        AttentionSpec::Transnormer {
            flavor: TransnormerFlavor::T1,
            role: TransnormerRole::Diag,
            block_size: 4,
        },
        AttentionSpec::Transnormer {
            flavor: TransnormerFlavor::T1,
            role: TransnormerRole::Norm,
            block_size: 4,
        },
    ];
    out.push(("transnormer-t1".into(), c));

    let mut c = preset("lrpe");
    c.layers = vec![
        AttentionSpec::Lrpe {
            core: LrpeCore::Permutation,
            p: LrpeP::OddEven,
            theta: LrpeTheta::Fixed,
            normalize: LrpeNormalize::Denominator,
            seed: 7,
        },
        AttentionSpec::Lrpe {
            core: LrpeCore::Complex,
            p: LrpeP::Identity,
            theta: LrpeTheta::Learned,
            normalize: LrpeNormalize::Rmsnorm,
            seed: 3,
        },
    ];
    out.push(("lrpe-options".into(), c));

    let mut c = preset("mep");
    c.layers = vec![
        AttentionSpec::Mep {
            kernels: vec![
                KernelTerm { kernel: KernelKind::KerpleLog, scale: 2.0, weight: 0.5, p: Some(1.5) },
                KernelTerm { kernel: KernelKind::KerplePower, scale: 1.0, weight: 0.25, p: Some(0.5) },
            ],
            slopes: Some(vec![0.5, 0.25]),
        },
        AttentionSpec::Alibi { slopes: Some(vec![1.0, 0.0]) },
    ];
    out.push(("mep-kernels-hybrid".into(), c));

    let mut c = preset("sinusoidal");
    c.layers = vec![AttentionSpec::Sinusoidal, AttentionSpec::T5 { num_buckets: 8, max_distance: 16 }];
    c.norm.kind = NormKind::Layernorm;
    c.ffn.kind = FfnKind::Gelu;
    c.tie_embeddings = false;
    out.push(("sinusoidal-t5-layernorm-gelu-untied".into(), c));

    let mut c = preset("gla");
    c.layers = vec![
        AttentionSpec::Gla { gate_rank: 2, gate_logit_normalizer: 8.0 },
        AttentionSpec::Sandwich { dbar: Some(4) },
    ];
    out.push(("gla-sandwich".into(), c));

    let mut c = preset("rope");
    c.layers = vec![AttentionSpec::Rope { base: 500.0 }, AttentionSpec::Fire { init_l: Some(4.0) }];
    c.absolute_position = AbsolutePosition::Sinusoidal;
    out.push(("rope-fire-abspos".into(), c));

    let mut c = ModelConfig::preset(
        "linear-elu",
        SizePreset { n_layers: 3, n_heads: 3, head_dim: 3, d_model: 6, ..tiny },
    )
    .expect("preset");
    c.layers[1] = AttentionSpec::MepParam { kerple_weight: 0.0, gaussian_weight: 1.0, gaussian_scale: 2.0 };
    c.layers[2] = AttentionSpec::Retnet;
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
