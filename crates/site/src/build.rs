//! `attnlab-site build`: compiles `attnlab-web` (and the fine-tune module `attnlab-tune`) for wasm32,
//! runs wasm-bindgen on them and writes the static site (page, content-hashed glue, wasm and
//! stylesheet, models, held-out text, results).

use std::ffi::OsString;
use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use serde::Deserialize;

use crate::html::{self, Assets, TemplateError};

/// The wasm32 target the page is compiled for.
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// The web crate and its binary (also the stem of the glue and wasm file names).
const WEB_PACKAGE: &str = "attnlab-web";
/// The fine-tune module's crate (a cdylib; the stem of its glue and wasm file names).
const TUNE_PACKAGE: &str = "attnlab-tune";
/// Written into every built site; `build` replaces an existing folder only when it holds this file.
pub const SITE_MARKER: &str = ".attnlab-site";
/// Files and folders copied into the site: (source relative to the root, name in the site).
const COPIES: &[(&str, &str)] = &[
    // models/<id>/{config.json, model.safetensors, tokenizer.json}, index.json, tokenizer.json
    ("www/models", "models"),
    // eval/heldout.txt: the held-out text of the perplexity-vs-length view
    ("www/eval", "eval"),
    // results.json: the shipped models' measurements (`attnlab report`), drawn in that view
    ("docs/results/results.json", "results.json"),
];
/// Folders nested deeper than this are refused while copying (guards against symlink loops).
const MAX_COPY_DEPTH: usize = 32;

/// The cargo profile the wasm is built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Size- and speed-optimized (root Cargo.toml): what is hosted and served.
    WebRelease,
    /// Unoptimized app code: quicker to rebuild, much slower in the page.
    Dev,
}

impl Profile {
    /// The name cargo knows the profile by (`--profile`).
    pub fn cargo_name(self) -> &'static str {
        match self {
            Profile::WebRelease => "web-release",
            Profile::Dev => "dev",
        }
    }
}

/// What to build, from where, into where.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The repository root: holds index.html, www/ and docs/results/.
    pub root: PathBuf,
    /// The site folder to (re)create.
    pub dist: PathBuf,
    pub profile: Profile,
}

/// Why a build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{} not found: run attnlab-site from the repository root", .0.display())]
    MissingInput(PathBuf),
    #[error("cannot run cargo ({program:?}): {source}")]
    SpawnCargo { program: OsString, source: io::Error },
    #[error("cargo build of {0} for {WASM_TARGET} failed ({1})")]
    Cargo(&'static str, ExitStatus),
    #[error("cargo built {0} but reported no .wasm file for it")]
    NoWasmArtifact(&'static str),
    #[error("wasm-bindgen failed on {}: {message}", wasm.display())]
    Bindgen { wasm: PathBuf, message: String },
    #[error("index.html: {0}")]
    Template(#[from] TemplateError),
    #[error("{} exists and was not written by attnlab-site (no {SITE_MARKER} in it): remove it or choose another --dist", .0.display())]
    ForeignDist(PathBuf),
    #[error("{}: folders nested deeper than {MAX_COPY_DEPTH} levels (a symlink loop?)", .0.display())]
    TooDeep(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BuildError + '_ {
    move |source| BuildError::Io { path: path.to_path_buf(), source }
}

/// A finished build: where it is and what it holds.
#[derive(Debug, Clone)]
pub struct Site {
    pub dist: PathBuf,
    pub assets: Assets,
    /// Size of the page's wasm module, and of the fine-tune module, in bytes.
    pub wasm_bytes: u64,
    pub tune_wasm_bytes: u64,
}

/// Builds the site: cargo, wasm-bindgen, page, copies. The new site is assembled beside `dist`
/// and moved into place at the end, so a failed build leaves the previous site untouched.
pub fn build(opts: &BuildOptions) -> Result<Site, BuildError> {
    let template_path = opts.root.join("index.html");
    let template = String::from_utf8(read_input(&template_path)?).map_err(|e| BuildError::Io {
        path: template_path.clone(),
        source: io::Error::new(io::ErrorKind::InvalidData, e),
    })?;
    let wasm = cargo_build_wasm(&opts.root, opts.profile, WEB_PACKAGE, "bin")?;
    let tune_wasm = cargo_build_wasm(&opts.root, opts.profile, TUNE_PACKAGE, "cdylib")?;

    let staging = sibling(&opts.dist, ".partial");
    prepare_empty(&staging)?;
    fs::write(staging.join(SITE_MARKER), "built by attnlab-site\n").map_err(io_err(&staging))?;

    let (js, wasm_name) = run_bindgen(&wasm, WEB_PACKAGE, &staging)?;
    let (tune_js, tune_wasm) = run_bindgen(&tune_wasm, TUNE_PACKAGE, &staging)?;
    let css_src = opts.root.join("www/style.css");
    let css = hashed_name(
        "style",
        &fs::read(&css_src).map_err(|_| BuildError::MissingInput(css_src.clone()))?,
        ".css",
    );
    fs::copy(&css_src, staging.join(&css)).map_err(io_err(&css_src))?;

    let mut assets = Assets { css, js, wasm: wasm_name, worker: String::new(), tune_js, tune_wasm };
    let worker = html::worker_script(&assets);
    assets.worker = hashed_name("worker", worker.as_bytes(), ".js");
    fs::write(staging.join(&assets.worker), worker).map_err(io_err(&staging))?;
    let page = html::render(&template, &assets)?;
    fs::write(staging.join("index.html"), page).map_err(io_err(&staging))?;
    for (from, to) in COPIES {
        let src = opts.root.join(from);
        if !src.exists() {
            return Err(BuildError::MissingInput(src));
        }
        copy_tree(&src, &staging.join(to), 0)?;
    }
    let size = |name: &str| fs::metadata(staging.join(name)).map(|m| m.len()).map_err(io_err(&staging));
    let (wasm_bytes, tune_wasm_bytes) = (size(&assets.wasm)?, size(&assets.tune_wasm)?);
    replace_dir(&staging, &opts.dist)?;
    Ok(Site { dist: opts.dist.clone(), assets, wasm_bytes, tune_wasm_bytes })
}

/// Reads an input of the site; a missing one is `MissingInput` (usually: not run from the root).
fn read_input(path: &Path) -> Result<Vec<u8>, BuildError> {
    fs::read(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => BuildError::MissingInput(path.to_path_buf()),
        _ => BuildError::Io { path: path.to_path_buf(), source: e },
    })
}

/// One line of `cargo build --message-format=json`; only the fields used here.
#[derive(Deserialize)]
struct CargoMessage {
    reason: String,
    #[serde(default)]
    target: Option<CargoTarget>,
    #[serde(default)]
    filenames: Vec<PathBuf>,
}

#[derive(Deserialize)]
struct CargoTarget {
    name: String,
    kind: Vec<String>,
}

/// Runs `cargo build -p <package> --target wasm32-unknown-unknown --profile <p>` (its binary of
/// the same name, or its library for a cdylib) in `root` (diagnostics go to the terminal) and
/// returns the path of the .wasm of target kind `kind`, as cargo reports it.
fn cargo_build_wasm(
    root: &Path,
    profile: Profile,
    package: &'static str,
    kind: &str,
) -> Result<PathBuf, BuildError> {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let spawn_err = |source| BuildError::SpawnCargo { program: program.clone(), source };
    let which: &[&str] = if kind == "bin" { &["--bin", package] } else { &["--lib"] };
    let mut child = Command::new(&program)
        .current_dir(root)
        .args(["build", "-p", package])
        .args(which)
        .args(["--target", WASM_TARGET])
        .args(["--profile", profile.cargo_name(), "--message-format=json-render-diagnostics"])
        .stdout(Stdio::piped())
        .spawn()
        .map_err(spawn_err)?;
    let stdout = child.stdout.take().ok_or_else(|| spawn_err(io::Error::other("no stdout pipe")))?;
    let mut wasm = None;
    // Cargo names the library target with underscores.
    let target_name = if kind == "bin" { package.to_string() } else { package.replace('-', "_") };
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(spawn_err)?;
        // Lines that are not artifact messages (or not JSON) are of no interest here.
        let Ok(msg) = serde_json::from_str::<CargoMessage>(&line) else { continue };
        let ours =
            msg.target.as_ref().is_some_and(|t| t.name == target_name && t.kind.iter().any(|k| k == kind));
        if msg.reason == "compiler-artifact" && ours {
            wasm = msg.filenames.into_iter().find(|f| f.extension().is_some_and(|e| e == "wasm"));
        }
    }
    let status = child.wait().map_err(spawn_err)?;
    if !status.success() {
        return Err(BuildError::Cargo(package, status));
    }
    wasm.ok_or(BuildError::NoWasmArtifact(package))
}

/// wasm-bindgen (`--target web`, no TypeScript) on `wasm`, writing `<stem>-<hash>.js`,
/// `<stem>-<hash>_bg.wasm` (and `snippets/` if the module had inline JS) into `out`. The hash is
/// of the input module: the pinned bindgen makes the same glue and module from the same input.
fn run_bindgen(wasm: &Path, stem: &str, out: &Path) -> Result<(String, String), BuildError> {
    let input = fs::read(wasm).map_err(io_err(wasm))?;
    let stem = hashed_name(stem, &input, "");
    let bindgen_err = |e: Box<dyn std::error::Error + Send + Sync>| BuildError::Bindgen {
        wasm: wasm.to_path_buf(),
        message: error_chain(&*e),
    };
    let mut bindgen = wasm_bindgen_cli_support::Bindgen::new();
    bindgen.input_bytes(&stem, input).web(true).map_err(|e| bindgen_err(e.into()))?.typescript(false);
    bindgen.generate(out).map_err(|e| bindgen_err(e.into()))?;
    Ok((format!("{stem}.js"), format!("{stem}_bg.wasm")))
}

/// `error: cause: cause` on one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `<stem>-<16 hex digits>` + `ext`, the digits a 64-bit FNV-1a hash of `content`. Not a
/// security measure: it only makes a changed file get a new name, so no cache serves stale code.
pub fn hashed_name(stem: &str, content: &[u8], ext: &str) -> String {
    let hash = content
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{stem}-{hash:016x}{ext}")
}

/// `dir` with `suffix` appended to its last component (`dist` → `dist.partial`).
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut name = dir.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "site".into());
    name.push(suffix);
    dir.with_file_name(name)
}

/// Whether `dir` may be deleted: it does not exist, is empty, or holds the site marker.
fn ours(dir: &Path) -> Result<bool, BuildError> {
    match fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none() || dir.join(SITE_MARKER).is_file()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(BuildError::Io { path: dir.to_path_buf(), source: e }),
    }
}

/// Creates `dir` empty, removing an earlier (partial) build there.
fn prepare_empty(dir: &Path) -> Result<(), BuildError> {
    if !ours(dir)? {
        return Err(BuildError::ForeignDist(dir.to_path_buf()));
    }
    if dir.exists() {
        fs::remove_dir_all(dir).map_err(io_err(dir))?;
    }
    fs::create_dir_all(dir).map_err(io_err(dir))
}

/// Moves the finished `staging` folder to `dist`, replacing a site built earlier.
fn replace_dir(staging: &Path, dist: &Path) -> Result<(), BuildError> {
    if !ours(dist)? {
        return Err(BuildError::ForeignDist(dist.to_path_buf()));
    }
    if dist.exists() {
        fs::remove_dir_all(dist).map_err(io_err(dist))?;
    }
    fs::rename(staging, dist).map_err(io_err(dist))
}

/// Copies a file, or a folder recursively (following symlinks), to `to`.
fn copy_tree(from: &Path, to: &Path, depth: usize) -> Result<(), BuildError> {
    if depth > MAX_COPY_DEPTH {
        return Err(BuildError::TooDeep(from.to_path_buf()));
    }
    if fs::metadata(from).map_err(io_err(from))?.is_dir() {
        fs::create_dir_all(to).map_err(io_err(to))?;
        for entry in fs::read_dir(from).map_err(io_err(from))? {
            let entry = entry.map_err(io_err(from))?;
            copy_tree(&entry.path(), &to.join(entry.file_name()), depth + 1)?;
        }
    } else {
        fs::copy(from, to).map_err(io_err(from))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_follow_the_content() {
        let a = hashed_name("style", b"body {}", ".css");
        assert!(a.starts_with("style-") && a.ends_with(".css") && a.len() == "style-".len() + 16 + 4);
        assert_eq!(a, hashed_name("style", b"body {}", ".css"));
        assert_ne!(a, hashed_name("style", b"body { }", ".css"));
        // FNV-1a 64 of the empty input is its offset basis.
        assert_eq!(hashed_name("x", b"", ""), "x-cbf29ce484222325");
    }

    #[test]
    fn siblings_keep_the_parent() {
        assert_eq!(
            sibling(Path::new("target/e2e/site"), ".partial"),
            PathBuf::from("target/e2e/site.partial")
        );
        assert_eq!(sibling(Path::new("dist"), ".partial"), PathBuf::from("dist.partial"));
    }

    #[test]
    fn a_foreign_folder_is_never_replaced() {
        let tmp = std::env::temp_dir().join(format!("attnlab-site-test-{}", std::process::id()));
        let dist = tmp.join("dist");
        fs::create_dir_all(&dist).expect("temp dir");
        fs::write(dist.join("notes.txt"), "mine").expect("write");
        let staging = tmp.join("staging");
        fs::create_dir_all(&staging).expect("temp dir");
        assert!(matches!(replace_dir(&staging, &dist), Err(BuildError::ForeignDist(_))));
        assert!(dist.join("notes.txt").is_file());

        fs::write(dist.join(SITE_MARKER), "").expect("write");
        replace_dir(&staging, &dist).expect("a site of ours is replaced");
        assert!(!dist.join("notes.txt").exists() && !staging.exists());
        fs::remove_dir_all(&tmp).expect("cleanup");
    }
}
