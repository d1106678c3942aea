//! Shared pieces of the subcommands: errors and exit codes, model/tokenizer/text loading, argument
//! parsers, output helpers (stdout that survives a closed pipe, tables, JSON) and progress bars.

use attnlab_core::config::VARIANT_IDS;
use attnlab_core::tokenizer::Tokenizer;
use attnlab_core::variants::{KernelKind, KernelTerm};
use attnlab_core::Model;
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

/// Default model folder, relative to the current directory.
pub const DEFAULT_MODEL_DIR: &str = "www/models/default";
/// The shipped models and their index (its `default` names the default model folder).
pub const MODELS_DIR: &str = "www/models";
/// The extra seeds of the shipped models (`NAME-seedK`, same index format): in the repository,
/// outside the site; `attnlab report` averages them with their models.
pub const SEEDS_DIR: &str = "seeds";
/// Default held-out text of `eval`, `analyze` and `dump`.
pub const DEFAULT_TEXT: &str = "www/eval/heldout.txt";

/// Exit status of a usage error (bad flags or values).
pub const EXIT_USAGE: i32 = 2;
/// Exit status of a runtime error (files, models, computation).
pub const EXIT_RUNTIME: i32 = 1;

/// An error reported as one `error: <message>` line on stderr with exit status `code`.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub msg: String,
    /// Stdout was closed by the reader (`| head`): stop quietly with status 0.
    pub quiet: bool,
}

impl CliError {
    pub fn usage(msg: impl Into<String>) -> CliError {
        CliError { code: EXIT_USAGE, msg: msg.into(), quiet: false }
    }
    pub fn runtime(msg: impl Into<String>) -> CliError {
        CliError { code: EXIT_RUNTIME, msg: msg.into(), quiet: false }
    }
    fn closed_pipe() -> CliError {
        CliError { code: 0, msg: String::new(), quiet: true }
    }
}

impl From<attnlab_core::Error> for CliError {
    /// Errors about the user's input values are usage errors (2); everything else is runtime (1).
    fn from(e: attnlab_core::Error) -> CliError {
        use attnlab_core::Error as E;
        match e {
            E::EmptyPrompt | E::ContextTooLong { .. } | E::InvalidArgument { .. } | E::UnknownVariant(_) => {
                CliError::usage(e.to_string())
            }
            other => CliError::runtime(other.to_string()),
        }
    }
}

pub type CliResult<T> = Result<T, CliError>;

/// Compute backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The CPU reference runtime of attnlab-core.
    Cpu,
    /// The wgpu backend of attnlab-gpu (generate, eval, analyze, dump, bench).
    Gpu,
}

/// `--backend`, shared by every command that runs a model.
#[derive(Debug, Clone, Args)]
pub struct BackendArg {
    /// Compute backend: `cpu` (the reference runtime) or `gpu` (wgpu; generate, eval, analyze, dump and bench)
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
}

impl BackendArg {
    /// For commands that run on the CPU only: fail with a clear message for `--backend gpu`.
    pub fn check(&self) -> CliResult<()> {
        match self.backend {
            Backend::Cpu => Ok(()),
            Backend::Gpu => Err(CliError::usage(
                "this command runs on the CPU reference only (--backend gpu is for generate, eval, analyze, dump and bench); \
                 use --backend cpu",
            )),
        }
    }
    pub fn name(&self) -> &'static str {
        match self.backend {
            Backend::Cpu => "cpu",
            Backend::Gpu => "gpu",
        }
    }
}

/// `--model DIR` and `--backend`, shared by every command that runs a model.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model folder holding config.json, model.safetensors and tokenizer.json [default: the default
    /// of www/models/index.json, else www/models/default]
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub backend: BackendArg,
}

impl ModelArgs {
    /// The model folder: `--model`, else the default model.
    pub fn dir(&self) -> PathBuf {
        self.model.clone().unwrap_or_else(default_model_dir)
    }

    /// Load and validate the model folder for a command that runs on either backend.
    pub fn load_any_backend(&self) -> CliResult<Model> {
        load_model_dir(&self.dir())
    }
}

/// Read and validate `www/models/index.json` (`None` when there is none).
pub fn read_model_index(models_dir: &Path) -> CliResult<Option<attnlab_core::catalog::ModelIndex>> {
    let path = models_dir.join(attnlab_core::catalog::INDEX_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", path.display())))?;
    attnlab_core::catalog::ModelIndex::from_json(&text)
        .map(Some)
        .map_err(|e| CliError::runtime(format!("`{}`: {e}", path.display())))
}

/// The default model folder: the index's default under www/models, else www/models/default (an
/// unreadable index also falls back, and loading then names the folder it tried).
pub fn default_model_dir() -> PathBuf {
    let models = Path::new(MODELS_DIR);
    match read_model_index(models) {
        Ok(Some(idx)) => models.join(idx.default),
        _ => PathBuf::from(DEFAULT_MODEL_DIR),
    }
}

/// Load `config.json` + `model.safetensors` from `dir` with a helpful message when it is missing.
pub fn load_model_dir(dir: &Path) -> CliResult<Model> {
    if !dir.exists() {
        return Err(CliError::runtime(format!(
            "model directory `{}` does not exist: create one with `attnlab init --variant alibi --out {}` \
             or pass --model DIR",
            dir.display(),
            dir.display()
        )));
    }
    if !dir.is_dir() {
        return Err(CliError::runtime(format!(
            "`{}` is not a directory (--model wants a model folder)",
            dir.display()
        )));
    }
    Model::load_dir(dir)
        .map_err(|e| CliError::runtime(format!("cannot load the model in `{}`: {e}", dir.display())))
}

/// The tokenizer file of a model folder: its own `tokenizer.json`, else the shared one of the indexed
/// models folder around it (`catalog::SHARED_TOKENIZER` beside index.json).
pub fn tokenizer_path(dir: &Path) -> CliResult<PathBuf> {
    let own = dir.join("tokenizer.json");
    if own.is_file() {
        return Ok(own);
    }
    let parent = dir.parent().filter(|p| p.join(attnlab_core::catalog::INDEX_FILE).is_file());
    if let Some(shared) =
        parent.map(|p| p.join(attnlab_core::catalog::SHARED_TOKENIZER)).filter(|p| p.is_file())
    {
        return Ok(shared);
    }
    Err(CliError::runtime(format!(
        "`{}` does not exist (and no shared tokenizer.json beside an index.json in the parent folder): every \
         model needs the tokenizer it was trained with",
        own.display()
    )))
}

/// Load the model folder's tokenizer ([`tokenizer_path`]) and check that its ids fit the vocabulary.
pub fn load_tokenizer(dir: &Path, model: &Model) -> CliResult<Tokenizer> {
    let path = tokenizer_path(dir)?;
    let tok = Tokenizer::from_file(&path).map_err(|e| CliError::runtime(e.to_string()))?;
    tok.check_fits(model.config().vocab_size).map_err(|e| {
        CliError::runtime(format!("`{}` does not fit the model: {}", path.display(), tokenizer_reason(e)))
    })?;
    Ok(tok)
}

/// The message of a tokenizer error without the generic `tokenizer.json: ` prefix.
pub fn tokenizer_reason(e: attnlab_core::Error) -> String {
    match e {
        attnlab_core::Error::Tokenizer(msg) => msg,
        other => other.to_string(),
    }
}

/// Read the `--text` file (default: [`DEFAULT_TEXT`] when present).
pub fn read_text(path: Option<&Path>) -> CliResult<(PathBuf, String)> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => {
            let p = PathBuf::from(DEFAULT_TEXT);
            if !p.is_file() {
                return Err(CliError::usage(format!(
                    "no --text given and the default `{DEFAULT_TEXT}` does not exist: pass --text FILE"
                )));
            }
            p
        }
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", path.display())))?;
    if text.trim().is_empty() {
        return Err(CliError::usage(format!("the text file `{}` is empty", path.display())));
    }
    Ok((path, text))
}

/// Encode text, failing on an empty result.
pub fn encode_text(tok: &Tokenizer, text: &str, path: &Path) -> CliResult<Vec<u32>> {
    let ids = tok.encode(text).map_err(|e| CliError::runtime(e.to_string()))?;
    if ids.is_empty() {
        return Err(CliError::usage(format!("`{}` encodes to no tokens", path.display())));
    }
    Ok(ids)
}

/// Catalog ids of every layer, e.g. `alibi,alibi,alibi,alibi`.
pub fn layer_variants(model: &Model) -> Vec<String> {
    model.config().layers.iter().map(|l| l.variant_id().to_string()).collect()
}

/// Compact description of the layer variants: `alibi ×4` or `regla, alibi, regla, alibi`.
pub fn variants_summary(model: &Model) -> String {
    let v = layer_variants(model);
    match v.first() {
        Some(first) if v.iter().all(|x| x == first) => format!("{first} ×{}", v.len()),
        _ => v.join(", "),
    }
}

// ---------------------------------------------------------------------------------------------
// Argument parsers (clap value parsers: failures become one-line usage errors).

/// A catalog variant id.
pub fn parse_variant(s: &str) -> Result<String, String> {
    if VARIANT_IDS.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!("unknown variant `{s}` (known: {})", VARIANT_IDS.join(", ")))
    }
}

/// A comma-separated list of catalog ids, one per layer.
pub fn parse_layers_spec(s: &str) -> Result<LayersSpec, String> {
    let ids: Vec<String> = s.split(',').map(|x| x.trim().to_string()).collect();
    for (i, id) in ids.iter().enumerate() {
        if id.is_empty() {
            return Err(format!(
                "item {} is empty (expected one catalog id per layer, comma-separated)",
                i + 1
            ));
        }
        parse_variant(id).map_err(|e| format!("item {} ({id}): {e}", i + 1))?;
    }
    Ok(LayersSpec(ids))
}

/// One catalog id per layer (`--layers-spec`).
#[derive(Debug, Clone, PartialEq)]
pub struct LayersSpec(pub Vec<String>);

/// A MEP kernel mix (`--kernels`).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelMix(pub Vec<KernelTerm>);

const KERNEL_SYNTAX: &str =
    "syntax: kernel:scale:weight[:p], comma-separated, kernel ∈ exp|gaussian|kerple-log|kerple-power";

/// Parse `exp:1:0.33,exp:0.5:0.33,gaussian:1:0.33` (optional 4th field `p` for kerple kernels).
pub fn parse_kernels(s: &str) -> Result<KernelMix, String> {
    let mut terms = Vec::new();
    for (i, item) in s.split(',').enumerate() {
        let item = item.trim();
        let bad = |why: String| format!("item {} `{item}`: {why} ({KERNEL_SYNTAX})", i + 1);
        let parts: Vec<&str> = item.split(':').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(bad(format!("has {} field(s), expected 3 or 4", parts.len())));
        }
        let kernel = match parts[0] {
            "exp" => KernelKind::Exp,
            "gaussian" => KernelKind::Gaussian,
            "kerple-log" => KernelKind::KerpleLog,
            "kerple-power" => KernelKind::KerplePower,
            other => return Err(bad(format!("unknown kernel `{other}`"))),
        };
        let num = |name: &str, v: &str| -> Result<f64, String> {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
                Ok(x) => Err(bad(format!("{name} {x} must be finite and >= 0"))),
                Err(_) => Err(bad(format!("{name} `{v}` is not a number"))),
            }
        };
        let scale = num("scale", parts[1])?;
        let weight = num("weight", parts[2])?;
        let p = match parts.get(3) {
            None => None,
            Some(v) => {
                if matches!(kernel, KernelKind::Exp | KernelKind::Gaussian) {
                    return Err(bad("the 4th field p is only used by kerple-log and kerple-power".into()));
                }
                let p = num("p", v)?;
                if p <= 0.0 {
                    return Err(bad("p must be > 0".into()));
                }
                Some(p)
            }
        };
        terms.push(KernelTerm { kernel, scale, weight, p });
    }
    attnlab_core::variants::mep::validate_kernel_terms(&terms).map_err(|(k, why)| {
        format!("item {} `{}`: {why}", k + 1, s.split(',').nth(k).unwrap_or("").trim())
    })?;
    Ok(KernelMix(terms))
}

// ---------------------------------------------------------------------------------------------
// Output.

fn write_stdout(bytes: &[u8]) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(CliError::closed_pipe()),
        Err(e) => Err(CliError::runtime(format!("cannot write to stdout: {e}"))),
    }
}

/// Write text to stdout and flush (streaming-safe; a closed pipe ends the program quietly).
pub fn out(s: &str) -> CliResult<()> {
    write_stdout(s.as_bytes())
}

/// Pretty JSON on stdout.
pub fn print_json(v: &serde_json::Value) -> CliResult<()> {
    let s = serde_json::to_string_pretty(v)
        .map_err(|e| CliError::runtime(format!("cannot serialize the JSON output: {e}")))?;
    out(&(s + "\n"))
}

/// JSON value of any serializable analysis result.
pub fn to_value<T: serde::Serialize>(v: &T) -> CliResult<serde_json::Value> {
    serde_json::to_value(v).map_err(|e| CliError::runtime(format!("cannot serialize the JSON output: {e}")))
}

/// Write `contents` to `path`, naming the path on failure.
pub fn write_file(path: &Path, contents: &[u8]) -> CliResult<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::runtime(format!("cannot create `{}`: {e}", parent.display())))?;
    }
    std::fs::write(path, contents)
        .map_err(|e| CliError::runtime(format!("cannot write `{}`: {e}", path.display())))
}

/// A plain text table: right-aligned columns except those listed in `left`.
pub fn table(headers: &[&str], rows: &[Vec<String>], left: &[usize]) -> String {
    let mut width: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.enumerate() {
            let w = width.get(i).copied().unwrap_or(0);
            let pad = w.saturating_sub(c.chars().count());
            if i > 0 {
                s.push_str("  ");
            }
            if left.contains(&i) {
                s.push_str(c);
                s.extend(std::iter::repeat_n(' ', pad));
            } else {
                s.extend(std::iter::repeat_n(' ', pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut s = line(&mut headers.iter().copied());
    for r in rows {
        s.push_str(&line(&mut r.iter().map(String::as_str)));
    }
    s
}

/// Format a float with `prec` decimals, switching to scientific notation for very large/small values.
pub fn num(x: f64, prec: usize) -> String {
    if x != 0.0 && (x.abs() >= 1e7 || x.abs() < 10f64.powi(-(prec as i32))) {
        format!("{x:.3e}")
    } else {
        format!("{x:.prec$}")
    }
}

/// An f32 as the f64 with the f32's shortest decimal form, so that JSON shows `0.9`, not
/// `0.8999999761581421`.
pub fn f32_json(x: f32) -> f64 {
    format!("{x}").parse::<f64>().unwrap_or(x as f64)
}

/// A note for the human reader, on stderr.
pub fn note(msg: &str) {
    eprintln!("note: {msg}");
}

// ---------------------------------------------------------------------------------------------
// Progress.

fn progress_enabled(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

/// A progress bar on stderr; hidden when stderr is not a terminal or with `--json`.
pub fn progress_bar(len: u64, msg: &str, json: bool) -> ProgressBar {
    if !progress_enabled(json) {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:32}] {pos}/{len} {elapsed_precise} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(msg.to_string());
    pb
}

/// A spinner on stderr for work of unknown length; hidden like [`progress_bar`].
pub fn spinner(msg: &str, json: bool) -> ProgressBar {
    if !progress_enabled(json) {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    pb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_lists_parse_and_name_bad_items() {
        let m = parse_kernels("exp:1:0.33,exp:0.5:0.33,gaussian:1:0.33").unwrap();
        assert_eq!(m.0, KernelTerm::mep_default());
        let m = parse_kernels("kerple-log:1:1:0.5").unwrap();
        assert_eq!(m.0[0].p, Some(0.5));
        for (bad, needle) in [
            ("exp:1", "item 1 `exp:1`"),
            ("exp:1:1,cosine:1:1", "item 2 `cosine:1:1`"),
            ("exp:x:1", "scale `x`"),
            ("exp:1:-1", "weight -1"),
            ("exp:1:1:2", "p is only used"),
            ("exp:1:0", "at least one kernel weight"),
            ("exp:1:1,,", "item 2"),
        ] {
            let e = parse_kernels(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    #[test]
    fn layer_specs_check_ids() {
        assert_eq!(parse_layers_spec("regla, alibi").unwrap().0, vec!["regla", "alibi"]);
        assert!(parse_layers_spec("regla,alibii").unwrap_err().contains("item 2"));
    }

    #[test]
    fn tables_align() {
        let t = table(&["a", "bb"], &[vec!["xyz".into(), "1".into()]], &[0]);
        assert_eq!(t, "a    bb\nxyz   1\n");
    }
}
