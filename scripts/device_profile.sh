#!/usr/bin/env bash
# Where a GPU training step's time goes on a lent GPU machine (the `device` tool): `attnlab bench
# --train --profile` (each kernel of one step timed alone) for a few variants and batch shapes,
# each with the weight gradients' split-K on and off (ATTNLAB_SPLIT_K, crates/gpu/src/train/
# record.rs), and the inference benchmark. Naga's loop guard is off as by default
# (ATTNLAB_LOOP_GUARD=on to measure it on; docs/bench.md has both). JSON under $OUT;
# $OUT/best_split names the faster split-K setting for alibi 16 × 128 and $OUT/best_tokens_per_s
# its throughput.
# Carried: target/release/attnlab, data/brown (its tokenizer), .gl (the Vulkan loaders).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder that comes back}"
A=${ATTNLAB:-target/release/attnlab}
VARIANTS=${VARIANTS:-alibi regla}
SPLITS=${SPLITS:-on off}
export ATTNLAB_LOOP_GUARD=${ATTNLAB_LOOP_GUARD:-off}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
vulkan_on_lent_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; uname -r
for v in $VARIANTS; do
  "$A" init --variant "$v" --tokenizer data/brown/tokenizer.json --out "/tmp/p-$v" --force >/dev/null
done
profile() {  # split variant batch seq_len
  local f=$OUT/profile-split-$1-$2-$3x$4.json
  ATTNLAB_SPLIT_K=$1 "$A" --json bench --train --model "/tmp/p-$2" --train-batch "$3" --train-seq-len "$4" \
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
for s in $SPLITS; do
  for v in $VARIANTS; do profile "$s" "$v" 16 128; done
  profile "$s" alibi 64 128
done
"$A" --json bench --model /tmp/p-alibi --backend gpu --contexts 128,512 --decode-tokens 8 \
  --repeats 1 >"$OUT/infer-alibi.json" 2>/dev/null
echo "inference:"; grep -o '"\(prefill\|decode\)_tokens_per_s": [0-9.]*' "$OUT/infer-alibi.json" | head -4
python3 - "$OUT" $SPLITS <<'PY'
import json, sys
out, splits = sys.argv[1], sys.argv[2:]
def tps(s):
    try:
        return json.load(open(f"{out}/profile-split-{s}-alibi-16x128.json"))["gpu"]["tokens_per_s"]
    except Exception:
        return 0
best = max(splits, key=tps)
open(f"{out}/best_split", "w").write(best)
open(f"{out}/best_tokens_per_s", "w").write(str(round(tps(best))))
print("best split-K setting:", best, round(tps(best)), "tokens/s")
PY
