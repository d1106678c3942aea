//! `attnlab-site`: build the attnlab page into a static site, and serve it. Run from the repository
//! root (scripts/serve.sh and tests/e2e/run.sh do).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use attnlab_site::build::{self, BuildOptions, Profile};
use attnlab_site::serve::Server;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "attnlab-site", about = "Build the attnlab page into a static site, and serve it")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Compile attnlab-web for wasm32, run wasm-bindgen and write the site (page, content-hashed
    /// glue, wasm and stylesheet, www/models, www/eval, docs/results/results.json) to --dist.
    Build {
        /// The site folder; replaced if an earlier build made it, refused otherwise.
        #[arg(long, default_value = "dist")]
        dist: PathBuf,
        /// Cargo profile of the wasm: web-release (optimized, what is hosted) or dev (quick to build).
        #[arg(long, value_enum, default_value_t = Profile::WebRelease)]
        profile: Profile,
    },
    /// Serve a built site over HTTP (GET/HEAD, no listings, nothing outside the folder).
    Serve {
        #[arg(long, default_value = "127.0.0.1")]
        address: IpAddr,
        /// TCP port; 0 picks a free one (printed on start).
        #[arg(long, default_value_t = 8080)]
        port: u16,
        #[arg(long, default_value = "dist")]
        dist: PathBuf,
    },
}

fn main() -> ExitCode {
    let result: Result<(), Box<dyn std::error::Error>> = match Cli::parse().command {
        Cmd::Build { dist, profile } => run_build(dist, profile),
        Cmd::Serve { address, port, dist } => run_serve(SocketAddr::new(address, port), dist),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("attnlab-site: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_build(dist: PathBuf, profile: Profile) -> Result<(), Box<dyn std::error::Error>> {
    let site = build::build(&BuildOptions { root: PathBuf::from("."), dist, profile })?;
    println!(
        "attnlab-site: built {} ({} profile): {}, {} ({} bytes), {}; fine-tune module {} ({} bytes)",
        site.dist.display(),
        profile.cargo_name(),
        site.assets.js,
        site.assets.wasm,
        site.wasm_bytes,
        site.assets.css,
        site.assets.tune_wasm,
        site.tune_wasm_bytes
    );
    Ok(())
}

fn run_serve(addr: SocketAddr, dist: PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::bind(addr, &dist)?;
    let bound = server.local_addr()?;
    let host = match bound {
        SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
        SocketAddr::V4(v4) => v4.ip().to_string(),
    };
    println!("attnlab-site: serving {} on http://{host}:{}/ (Ctrl+C stops)", dist.display(), bound.port());
    server.run()?;
    Ok(())
}
