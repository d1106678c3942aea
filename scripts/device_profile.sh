#!/usr/bin/env bash
# Where a GPU training step's time goes on a lent GPU machine (the `device` tool): `attnlab bench
# --train --profile` (each kernel of one step timed alone) for a few variants and batch shapes,
# and the inference benchmark beside it as a sanity check of the device. JSON under $OUT.
# Carried: target/release/attnlab, data/brown (its tokenizer), .gl (the Vulkan loaders).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder that comes back}"
A=${ATTNLAB:-target/release/attnlab}
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
vulkan_on_lent_gpu
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null; uname -r
for v in ${VARIANTS:-alibi regla kerple-log}; do
  "$A" init --variant "$v" --tokenizer data/brown/tokenizer.json --out "/tmp/p-$v" --force >/dev/null
done
profile() {  # variant batch seq_len
  "$A" --json bench --train --model "/tmp/p-$1" --train-batch "$2" --train-seq-len "$3" --train-steps 3 \
    --profile >"$OUT/profile-$1-$2x$3.json" 2>/dev/null
  python3 - "$OUT/profile-$1-$2x$3.json" <<'PY'
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
for v in ${VARIANTS:-alibi regla kerple-log}; do profile "$v" 16 128; done
profile alibi 64 128
"$A" --json bench --model /tmp/p-alibi --backend gpu --contexts 128,512 --decode-tokens 8 --repeats 1 \
  >"$OUT/infer-alibi.json" 2>/dev/null
grep -o '"prefill_tokens_per_s": [0-9.]*' "$OUT/infer-alibi.json" | head -4
