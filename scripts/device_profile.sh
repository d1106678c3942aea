#!/usr/bin/env bash
# Where a GPU training step's time goes on a lent GPU machine (the `device` tool): `attnlab bench
# --train --profile` (each kernel of one step timed alone) for a few variants and batch shapes,
# and the inference benchmark beside it, each with naga's loop guard on and off
# (ATTNLAB_LOOP_GUARD, crates/gpu/src/shaders.rs). JSON under $OUT; $OUT/best_guard names the
# faster setting for alibi 16 × 128 and $OUT/best_tokens_per_s its throughput.
# Carried: target/release/attnlab, data/brown (its tokenizer), .gl (the Vulkan loaders).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder that comes back}"
A=${ATTNLAB:-target/release/attnlab}
VARIANTS=${VARIANTS:-alibi regla}
GUARDS=${GUARDS:-on off}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
vulkan_on_lent_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; uname -r
for v in $VARIANTS; do
  "$A" init --variant "$v" --tokenizer data/brown/tokenizer.json --out "/tmp/p-$v" --force >/dev/null
done
profile() {  # guard variant batch seq_len
  local f=$OUT/profile-$1-$2-$3x$4.json
  ATTNLAB_LOOP_GUARD=$1 "$A" --json bench --train --model "/tmp/p-$2" --train-batch "$3" --train-seq-len "$4" \
    --train-steps 3 --profile >"$f" 2>/dev/null
  python3 - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); g = d["gpu"]; p = g.get("profile") or {}
print(sys.argv[1], "gpu tok/s", round(g.get("tokens_per_s", 0)), "cpu tok/s", round(d["cpu"]["tokens_per_s"]),
      "profile ms", round(1e3 * p.get("seconds", 0), 1), g.get("error", ""))
for k in p.get("by_kernel", [])[:8]:
    print(f'  {k["kernel"]:14} {k["count"]:4} {1e3 * k["seconds"]:9.2f} ms')
for i in p.get("largest", [])[:8]:
    print(f'  largest {i["kernel"]:14} grid {i["grid"]} {1e3 * i["seconds"]:8.2f} ms')
PY
}
for g in $GUARDS; do
  for v in $VARIANTS; do profile "$g" "$v" 16 128; done
  profile "$g" alibi 64 128
  ATTNLAB_LOOP_GUARD=$g "$A" --json bench --model /tmp/p-alibi --backend gpu --contexts 128,512 --decode-tokens 8 \
    --repeats 1 >"$OUT/infer-$g-alibi.json" 2>/dev/null
  echo "inference, loop guard $g:"; grep -o '"\(prefill\|decode\)_tokens_per_s": [0-9.]*' "$OUT/infer-$g-alibi.json" | head -4
done
python3 - "$OUT" $GUARDS <<'PY'
import json, sys
out, guards = sys.argv[1], sys.argv[2:]
def tps(g):
    try:
        return json.load(open(f"{out}/profile-{g}-alibi-16x128.json"))["gpu"]["tokens_per_s"]
    except Exception:
        return 0
best = max(guards, key=tps)
open(f"{out}/best_guard", "w").write(best)
open(f"{out}/best_tokens_per_s", "w").write(str(round(tps(best))))
print("best loop guard:", best, round(tps(best)), "tokens/s")
PY
