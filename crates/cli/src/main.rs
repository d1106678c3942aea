//! `attnlab`: command line for the attnlab runtime — create random-weight models of any attention
//! variant, generate text, measure perplexity versus context length, print position-bias kernels,
//! analyze attention (LAA, entropy, gates), dump tensors, and benchmark prefill/decode throughput.
//!
//! Errors are reported as ONE line `error: <message>` on stderr; the exit status is 2 for usage
//! errors (bad flags or values) and 1 for runtime errors (files, models, computation).

mod cmd;
mod common;
mod gpu;
mod svg;

use clap::{Parser, Subcommand};
use common::{CliError, CliResult, EXIT_RUNTIME, EXIT_USAGE};

/// mimalloc, not glibc's malloc: a candle training step allocates and frees tensors of megabytes,
/// which glibc hands back to the OS and then faults in again, page by page, on the next step
/// (docs/bench.md, "allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// attnlab: a Rust runtime for small language models that makes attention variants visible.
#[derive(Debug, Parser)]
#[command(
    name = "attnlab",
    version,
    about,
    long_about = "attnlab: a Rust runtime for small language models that makes attention variants visible \
                  (ALiBi, Kerple, T5, RoPE, FIRE, MEP kernel mixes, TransNormer, LRPE, GLA, ReGLA, RetNet, …).\n\n\
                  A model is a folder with config.json, model.safetensors and tokenizer.json; commands that run \
                  a model read `www/models/default` unless --model DIR is given. Start with \
                  `attnlab init --variant alibi --out www/models/default`.",
    after_help = "Errors are one `error:` line on stderr; exit status 2 = usage error, 1 = runtime error."
)]
struct Cli {
    /// Machine-readable JSON on stdout instead of human-readable tables (progress bars are hidden)
    #[arg(long, global = true)]
    json: bool,
    /// CPU kernels' instruction set: the best this CPU has, or a lower one to compare against
    /// (e.g. sse2: 4-lane SIMD like the page's wasm SIMD128); the results are the same bits
    #[arg(long, global = true, value_enum, default_value = "best")]
    cpu_kernels: CpuKernels,
    /// GPU: read f16 matrices as u32 words widened by integer operations even where the adapter
    /// has shader-f16 (to compare the two; the results are the same bits)
    #[arg(long, global = true)]
    no_shader_f16: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Init(cmd::init::InitArgs),
    Generate(cmd::generate::GenerateArgs),
    Eval(cmd::eval::EvalArgs),
    Kernels(cmd::kernels::KernelsArgs),
    Analyze(cmd::analyze::AnalyzeArgs),
    Dump(cmd::dump::DumpArgs),
    Bench(cmd::bench::BenchArgs),
    Convert(cmd::convert::ConvertArgs),
    Import(cmd::import::ImportArgs),
    Data(cmd::data::DataArgs),
    Train(cmd::train::TrainArgs),
    Report(cmd::report::ReportArgs),
}

/// `--cpu-kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum CpuKernels {
    Best,
    Avx2,
    Sse2,
    Portable,
}

fn run(cli: Cli) -> CliResult<()> {
    let json = cli.json;
    use attnlab_core::kernels::{choose_level, Level};
    let level = match cli.cpu_kernels {
        CpuKernels::Best => None,
        CpuKernels::Avx2 => Some(Level::Avx2),
        CpuKernels::Sse2 => Some(Level::Sse2),
        CpuKernels::Portable => Some(Level::Portable),
    };
    if let Some(level) = level {
        choose_level(level).map_err(|e| CliError::usage(format!("--cpu-kernels: {e}")))?;
    }
    gpu::NO_SHADER_F16.store(cli.no_shader_f16, std::sync::atomic::Ordering::Relaxed);
    match cli.command {
        Command::Init(a) => cmd::init::run(a, json),
        Command::Generate(a) => cmd::generate::run(a, json),
        Command::Eval(a) => cmd::eval::run(a, json),
        Command::Kernels(a) => cmd::kernels::run(a, json),
        Command::Analyze(a) => cmd::analyze::run(a, json),
        Command::Dump(a) => cmd::dump::run(a, json),
        Command::Bench(a) => cmd::bench::run(a, json),
        Command::Convert(a) => cmd::convert::run(a, json),
        Command::Import(a) => cmd::import::run(a, json),
        Command::Data(a) => cmd::data::run(a, json),
        Command::Train(a) => cmd::train::run(a, json),
        Command::Report(a) => cmd::report::run(a, json),
    }
}

/// Collapse a message to one line.
fn one_line(msg: &str) -> String {
    msg.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first line of a clap error, without clap's own `error: ` prefix.
fn clap_message(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let first = rendered.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    const COMMANDS: &[&str] = &[
        "init", "generate", "eval", "kernels", "analyze", "dump", "bench", "convert", "import", "data",
        "train", "report",
    ];
    let sub = std::env::args().skip(1).find(|a| COMMANDS.contains(&a.as_str()));
    let help = sub.map_or("attnlab --help".to_string(), |s| format!("attnlab {s} --help"));
    format!("{} (see `{help}`)", one_line(first))
}

fn main() {
    // A panic is a bug; still keep the promise of one `error:` line and no backtrace noise.
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown failure".to_string());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("error: internal error{at}: {} (this is a bug in attnlab)", one_line(&payload));
    }));

    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind;
            match err.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    // Help and version go to stdout with status 0; a closed pipe is not an error.
                    let _ = common::out(&err.render().to_string());
                    std::process::exit(0);
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
                    eprintln!(
                        "error: no command given; run `attnlab --help` for the list \
                         (init, generate, eval, kernels, analyze, dump, bench, data, train)"
                    );
                    std::process::exit(EXIT_USAGE);
                }
                _ => {
                    eprintln!("error: {}", clap_message(&err));
                    std::process::exit(EXIT_USAGE);
                }
            }
        }
    };
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli))) {
        Ok(Ok(())) => 0,
        Ok(Err(CliError { quiet: true, .. })) => 0,
        Ok(Err(e)) => {
            eprintln!("error: {}", one_line(&e.msg));
            e.code
        }
        Err(_) => EXIT_RUNTIME,
    };
    std::process::exit(code);
}
