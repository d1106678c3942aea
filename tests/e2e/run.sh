#!/usr/bin/env bash
# End-to-end browser tests: build the site with attnlab-site (crates/site) exactly as for hosting
# (web-release profile, relative URLs), add random-weight models with the CLI, serve it from a
# subpath and drive headless Chromium.
# Called by scripts/test.sh; prerequisites (wasm32 target, chromium, node) come from there.
#
#   tests/e2e/run.sh [ATTNLAB_BINARY [ATTNLAB_SITE_BINARY]]
# Without ATTNLAB_SITE_BINARY the site builder runs through `cargo run -p attnlab-site`.
# Screenshots of every view land in target/e2e/shots/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
ATTNLAB="${1:-$ROOT/target/debug/attnlab}"
[[ -x "$ATTNLAB" ]] || { echo "e2e: attnlab binary not found at $ATTNLAB" >&2; exit 1; }
if [[ -n "${2:-}" ]]; then
    [[ -x "$2" ]] || { echo "e2e: attnlab-site binary not found at $2" >&2; exit 1; }
    SITE_TOOL=("$2")
else
    SITE_TOOL=(cargo run --quiet -p attnlab-site --)
fi

OUT="$ROOT/target/e2e"
SITE="$OUT/site"
rm -rf "$SITE"
mkdir -p "$OUT/shots"

echo "e2e: attnlab-site build (web-release profile) into $SITE"
"${SITE_TOOL[@]}" build --dist "$SITE"

# The trained models that the build copied from www/models are replaced by small random ones, with an
# index of their own: alibi (the default) and regla in two families, plus regla-init, an untrained
# regla with gate biases at ±6 listed as regla's initial checkpoint (the gate view's Fig. 4
# comparison). models/default (the page's fallback without an index) is a copy of alibi.
echo "e2e: random models: alibi (default), regla, regla-init (initial_of regla), long/mep (a second collection); shipped mep, linear-elu, transnormer, fast-decay, regla-fig4, gla-fig4, rope, regla-fig4-init, gla-fig4-init; fallback default = alibi"
rm -rf "$SITE/models"
mkdir -p "$SITE/models"
"$ATTNLAB" init --variant alibi --seed 0 --out "$SITE/models/alibi" >/dev/null
"$ATTNLAB" init --variant regla --seed 0 --out "$SITE/models/regla" >/dev/null
"$ATTNLAB" init --variant regla --seed 1 --gate-bias-init 6 --dtype f16 \
    --tokenizer "$SITE/models/regla/tokenizer.json" --out "$SITE/models/regla-init" >/dev/null
# regla-init uses the collection's shared tokenizer (models/tokenizer.json beside index.json), as the
# shipped models do: the page and the CLI fall back to it when a folder has none.
mv "$SITE/models/regla-init/tokenizer.json" "$SITE/models/tokenizer.json"
cp -r "$SITE/models/alibi" "$SITE/models/default"
# A smaller random ALiBi (2 layers of 2 heads) with the shipped tokenizer: compare mode beside a
# 4 × 4 model clamps the selection.
"$ATTNLAB" init --variant alibi --seed 3 --layers 2 --heads 2 --d-model 64 --head-dim 32 \
    --tokenizer www/models/tokenizer.json --out "$SITE/models/alibi-small" >/dev/null
# One real shipped model (trained mep, F16 weights) with its Brown tokenizer, for the
# load-to-first-token measurement.
# Compare mode's presets and tests use more shipped models (trained linear-elu and transnormer with
# rope, the softmax reference of the TransNormer Fig. 2 preset; the ReGLA Fig. 4 pair with both
# initial checkpoints; fast-decay for WebGPU maps with value-axis gates), each with the Brown
# tokenizer in its folder.
for m in mep linear-elu transnormer fast-decay regla-fig4 gla-fig4 rope regla-fig4-init gla-fig4-init; do
    mkdir -p "$SITE/models/$m"
    cp "www/models/$m/config.json" "www/models/$m/model.safetensors" "$SITE/models/$m/"
    cp www/models/tokenizer.json "$SITE/models/$m/tokenizer.json"
done
# A second collection, listed by the index: its own index.json and shared tokenizer in
# models/long/, a random MEP named like the shipped one (the page lists it as long/mep).
"$ATTNLAB" init --variant mep --seed 2 --out "$SITE/models/long/mep" >/dev/null
mv "$SITE/models/long/mep/tokenizer.json" "$SITE/models/long/tokenizer.json"
cat >"$SITE/models/long/index.json" <<'JSON'
{"default": "mep", "models": [{"name": "mep", "family": "softmax + position bias", "description": "Random MEP in a second collection (e2e)."}]}
JSON
cat >"$SITE/models/index.json" <<'JSON'
{
  "default": "alibi",
  "collections": [{"folder": "long", "label": "second collection, e2e"}],
  "models": [
    {"name": "alibi", "family": "softmax + position bias", "description": "Random ALiBi model (e2e)."},
    {"name": "regla", "family": "gated linear attention", "description": "Random ReGLA model (e2e)."},
    {"name": "regla-init", "family": "gated linear attention",
     "description": "Random ReGLA with gate biases at ±6 (e2e).", "initial_of": "regla"},
    {"name": "mep", "family": "trained (shipped)", "description": "The shipped trained MEP model."},
    {"name": "linear-elu", "family": "trained (shipped)", "description": "The shipped 1+elu linear attention model."},
    {"name": "transnormer", "family": "trained (shipped)", "description": "The shipped TransNormer model."},
    {"name": "fast-decay", "family": "trained (shipped)", "description": "The shipped Fast Decay model."},
    {"name": "regla-fig4", "family": "trained (shipped)", "description": "The shipped ReGLA Fig. 4 model (extreme gate init)."},
    {"name": "gla-fig4", "family": "trained (shipped)", "description": "The shipped GLA Fig. 4 model (extreme gate init)."},
    {"name": "rope", "family": "trained (shipped)", "description": "The shipped RoPE softmax model."},
    {"name": "regla-fig4-init", "family": "trained (shipped)", "description": "The shipped untrained start of regla-fig4.",
     "initial_of": "regla-fig4"},
    {"name": "gla-fig4-init", "family": "trained (shipped)", "description": "The shipped untrained start of gla-fig4.",
     "initial_of": "gla-fig4"},
    {"name": "alibi-small", "family": "small random (e2e)", "description": "Random ALiBi, 2 layers of 2 heads (e2e)."}
  ]
}
JSON
WASM_FILE=$(find "$SITE" -maxdepth 1 -name 'attnlab-web-*.wasm' | head -n 1)
WASM_BYTES=$(stat -c %s "$WASM_FILE")
WASM_GZIP=$(gzip -9 -c "$WASM_FILE" | wc -c)
TUNE_FILE=$(find "$SITE" -maxdepth 1 -name 'attnlab-tune-*.wasm' | head -n 1)
TUNE_BYTES=$(stat -c %s "$TUNE_FILE")
echo "e2e: wasm bundle ${WASM_BYTES} bytes (${WASM_GZIP} gzipped); fine-tune module ${TUNE_BYTES} bytes ($(gzip -9 -c "$TUNE_FILE" | wc -c) gzipped, fetched on the first Train); site without models $(du -sb --exclude=models "$SITE" | cut -f1) bytes"
# The page's size budget: 3 MB since issue 5, 3.2 MB since the model moved into a Web Worker
# (issue 12: +75 KB for the worker, its message routing and postcard; docs/bench.md), 3.3 MB since
# issue 15 (+81 KB: the page's state in its URL with copy link, and SVG/PNG/CSV/JSON figure exports),
# 3.35 MB since issue 15 item 1 (compare mode: model B beside the page's model, side-by-side heatmaps
# with A − B, overlays and presets: 3,291,290 → 3,347,382 bytes, +56 KB, mostly the views' markup),
# 3.355 MB since the presets' third and fourth models (TransNormer Fig. 2's softmax reference traced
# beside A and B, B's initial checkpoint in ReGLA Fig. 4: 3,347,382 → 3,352,877 bytes, +5.5 KB after
# sharing the trace future and the aux loads; the view markup and the new props do not fit 3.35 MB),
# 3.37 MB since the Fast Decay variant (issue 14 item 3: the variant, the value-axis decay of the
# shared scan in the CPU reference and ~110 lines of WGSL carried as text: 3,352,986 → 3,365,689
# bytes, +12.7 KB), 3.44 MB since "train on this text" (issue 14 item 2: the panel, its live loss
# chart, the download of the tuned model and the worker's handle on the fine-tune module:
# 3,365,689 → 3,435,655 bytes, +70 KB; the
# trainer itself, candle, is the separate module attnlab-tune, 2.36 MB, fetched on the first Train,
# which the page's bundle would otherwise carry: 5.09 MB measured with it linked in), 3.445 MB since
# fine-tuning on WebGPU (issue 14 item 1: the worker's handle awaits the GPU tuner's promises and
# reports the device: 3,435,866 → 3,440,383 bytes, +4.5 KB), 3.505 MB since the lab views trace on
# WebGPU (issue 12 must-show 5: the introspection half of attnlab-gpu, its capture and map shaders
# carried as text, the heatmap's zoom and tiles, and the worker's restart after a crash:
# 3,440,628 → 3,499,509 bytes, +59 KB; the perplexity sweep on WebGPU and model B's zoom included),
# 3.515 MB since the CPU's vectorised exponential, softmax, SiLU and four-query attention kernels
# (issue 12 must-show 4: each compiled for SIMD128 and the plain lanes; with CoPE's fused decode
# and f32 matrices for small models: 3,499,509 → 3,512,606 bytes, +13 KB), 3.52 MB since the
# shader-f16 reads of f16 matrices (weights_f16.wgsl and the composed f16 sources), the linear maps'
# tabulated exponents and the worker's watchdog: 3,512,606 → 3,517,021 bytes, +4.6 KB), 3.525 MB
# since the weight-reading shaders load four elements at a time (three binding snippets and the
# vector paths with their element-by-element fallbacks, carried as text: 3,517,021 → 3,520,974
# bytes, +4.0 KB), 3.54 MB since the index lists collections (the models trained at length 512:
# their index's parser and merge, model paths in links, a shared tokenizer per collection, a named
# error for a missing collection index: 3,524,891 → 3,534,393 bytes, +9.5 KB).
if ((WASM_BYTES > 3540000)); then
    echo "e2e: the wasm bundle is over the 3,540,000-byte budget" >&2
    exit 1
fi
# The fine-tune module's own budget (not part of the page's load): 2.4 MB for candle's step, 2.7 MB
# since it also carries the WGSL trainer and wgpu's WebGPU backend (2,358,986 → 2,633,006 bytes).
if ((TUNE_BYTES > 2700000)); then
    echo "e2e: the fine-tune module is over its 2,700,000-byte budget" >&2
    exit 1
fi

cd tests/e2e
if [[ ! -d node_modules/playwright-core ]]; then
    npm ci --no-audit --no-fund
fi
SITE="$SITE" ATTNLAB="$ATTNLAB" SHOTS="$OUT/shots" node --test --test-reporter=spec page.test.mjs
