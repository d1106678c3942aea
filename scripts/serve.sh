#!/usr/bin/env bash
# Build the attnlab web app and serve it on http://127.0.0.1:${PORT:-8080}/ (trunk, live reload).
#
# Installs what is missing, and only that: the wasm32 rust target, trunk 0.21.14 and the
# wasm-bindgen-cli that matches Cargo.lock. The page serves the trained models of www/models/index.json;
# without an index it creates a random default model in www/models/default/. trunk runs offline: it never downloads tools, it uses the installed wasm-bindgen,
# and wasm-opt is disabled in index.html.
#
# Environment: PORT (default 8080), ADDRESS (default 127.0.0.1), RELEASE=1 to serve an optimized
# build (slower to rebuild, much faster inference).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

PORT="${PORT:-8080}"
ADDRESS="${ADDRESS:-127.0.0.1}"
if ! [[ "$PORT" =~ ^[0-9]+$ ]] || ((10#$PORT < 1 || 10#$PORT > 65535)); then
    die "PORT must be a TCP port number (1-65535), got '$PORT'"
fi

MODEL_DIR="www/models/default"

banner "prerequisites"
ensure_cargo
ensure_wasm_target
ensure_trunk
ensure_wasm_bindgen

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

trunk_args=(serve --offline --skip-version-check --disable-address-lookup --address "$ADDRESS" --port "$PORT")
if [[ "${RELEASE:-0}" == "1" ]]; then
    trunk_args+=(--release)
fi

banner "trunk serve"
info "serving on http://$ADDRESS:$PORT/ (the first build takes a few minutes; Ctrl+C stops)"
exec trunk "${trunk_args[@]}"
