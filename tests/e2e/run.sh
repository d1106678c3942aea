#!/usr/bin/env bash
# End-to-end browser tests: build the site with trunk exactly as for hosting (relative URLs), add
# random-weight models with the CLI, serve it from a subpath and drive headless Chromium.
# Called by scripts/test.sh; prerequisites (trunk, wasm-bindgen-cli, chromium, node) come from there.
#
#   tests/e2e/run.sh [ATTNLAB_BINARY]
# Screenshots of every view land in target/e2e/shots/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
ATTNLAB="${1:-$ROOT/target/debug/attnlab}"
[[ -x "$ATTNLAB" ]] || { echo "e2e: attnlab binary not found at $ATTNLAB" >&2; exit 1; }

OUT="$ROOT/target/e2e"
SITE="$OUT/site"
rm -rf "$SITE"
mkdir -p "$OUT/shots"

echo "e2e: trunk build --release (public URL ./) into $SITE"
trunk build --release --offline --public-url ./ --dist "$SITE" index.html

echo "e2e: random models: default = alibi, regla"
rm -rf "$SITE/models/default" "$SITE/models/regla"
"$ATTNLAB" init --variant alibi --seed 0 --out "$SITE/models/default" >/dev/null
"$ATTNLAB" init --variant regla --seed 0 --out "$SITE/models/regla" >/dev/null
WASM_BYTES=$(find "$SITE" -maxdepth 1 -name '*.wasm' -printf '%s\n' | head -n 1)
echo "e2e: wasm bundle ${WASM_BYTES:-?} bytes; site without models $(du -sb --exclude=models "$SITE" | cut -f1) bytes"

cd tests/e2e
if [[ ! -d node_modules/playwright-core ]]; then
    npm ci --no-audit --no-fund
fi
SITE="$SITE" ATTNLAB="$ATTNLAB" SHOTS="$OUT/shots" node --test --test-reporter=spec page.test.mjs
