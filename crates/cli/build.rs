//! Fingerprint of the code that `attnlab report` measures with: the model runtime of attnlab-core,
//! the report's measurement (report/measure.rs with its constants, report/stats.rs), the locked
//! dependency versions and the compiler. The report's cache of per-model measurements is used only
//! by a binary with the same fingerprint; rendering (report.rs, sections, claims) may change freely.

use std::path::{Path, PathBuf};

/// Sources that decide a report measurement, relative to the workspace root.
const MEASURED_BY: [&str; 5] = [
    "crates/core/src",
    "crates/core/Cargo.toml",
    "crates/cli/src/cmd/report/measure.rs",
    "crates/cli/src/cmd/report/stats.rs",
    "Cargo.lock",
];

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("../..");
    let mut files = Vec::new();
    for p in MEASURED_BY {
        println!("cargo:rerun-if-changed=../../{p}");
        collect(&root.join(p), &mut files);
    }
    files.sort();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).to_string_lossy().into_owned();
        h = fnv1a(h, rel.as_bytes());
        h = fnv1a(h, &std::fs::read(f).unwrap_or_default());
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc).arg("-V").output().map(|o| o.stdout).unwrap_or_default();
    h = fnv1a(h, &version);
    println!("cargo:rustc-env=ATTNLAB_MEASURE_CODE={h:016x}");
}

/// Every file under `p` (or `p` itself).
fn collect(p: &Path, out: &mut Vec<PathBuf>) {
    match std::fs::read_dir(p) {
        Ok(entries) => entries.flatten().for_each(|e| collect(&e.path(), out)),
        Err(_) if p.is_file() => out.push(p.to_path_buf()),
        Err(_) => {}
    }
}

/// 64-bit FNV-1a over `bytes`, continuing from `h`.
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}
