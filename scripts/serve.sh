#!/usr/bin/env bash
# Build the attnlab page (optimized: the cargo profile web-release) and serve it on
# http://127.0.0.1:${PORT:-8080}/.
#
# Installs what is missing, and only that: the wasm32 rust target. The site builder is the workspace
# crate attnlab-site (crates/site): cargo compiles it like any crate (no `cargo install`), it builds
# the wasm with cargo, runs wasm-bindgen as a library (always the version of the `wasm-bindgen`
# crate) and serves the result. The page serves the trained models of www/models/index.json; without
# an index it creates a random default model in www/models/default/. Nothing is downloaded but crates.
#
# Environment: PORT (default 8080), ADDRESS (default 127.0.0.1). After a code change, run the script
# again (a rebuild only compiles what changed).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

PORT="${PORT:-8080}"
ADDRESS="${ADDRESS:-127.0.0.1}"
if ! [[ "$PORT" =~ ^[0-9]+$ ]] || ((10#$PORT < 1 || 10#$PORT > 65535)); then
    die "PORT must be a TCP port number (1-65535), got '$PORT'"
fi
if ! [[ "$ADDRESS" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ || "$ADDRESS" =~ ^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*$ ]]; then
    die "ADDRESS must be an IP address (e.g. 127.0.0.1, 0.0.0.0 or ::1), got '$ADDRESS'"
fi
PORT=$((10#$PORT))

MODEL_DIR="www/models/default"

banner "prerequisites"
ensure_cargo
ensure_wasm_target

if [[ -f www/models/index.json ]]; then
    banner "shipped models (www/models/index.json)"
    info "the page loads the models listed in www/models/index.json (default: $(grep -o '"default": *"[a-z0-9-]*"' www/models/index.json | sed 's/.*"\([a-z0-9-]*\)"$/\1/'))"
else
    banner "default model ($MODEL_DIR)"
    if [[ -f "$MODEL_DIR/config.json" ]]; then
        info "$MODEL_DIR/config.json present: keeping the existing model"
    else
        info "no www/models/index.json: creating a random default model (alibi, seed 0)"
        cargo run --release -p attnlab-cli -- init --variant alibi --seed 0 --out "$MODEL_DIR"
    fi
    for f in config.json model.safetensors tokenizer.json; do
        [[ -f "$MODEL_DIR/$f" ]] || die "$MODEL_DIR/$f is missing (the page loads config.json, model.safetensors and tokenizer.json)"
    done
fi

banner "site builder (cargo build --release -p attnlab-site)"
cargo build --release -p attnlab-site
SITE_TOOL="$(cargo_target_dir)/release/attnlab-site"

banner "page (attnlab-site build: web-release wasm, wasm-bindgen, dist/)"
"$SITE_TOOL" build --dist dist
info "page built in $SECONDS s"

banner "serve dist/"
exec "$SITE_TOOL" serve --dist dist --address "$ADDRESS" --port "$PORT"
