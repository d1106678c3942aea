#!/usr/bin/env bash
# Ship the trained runs of scripts/train_shipped.sh: convert data/runs/<name> (f32 checkpoints) into
# www/models/<name> with F16 weights (config.json, model.safetensors, history.json; the tokenizer once,
# shared, in www/models/tokenizer.json), including the Fig. 4 initial checkpoints, check the 80 MB
# budget, then regenerate docs/results.md.
#
#   scripts/ship_models.sh            # every model listed in www/models/index.json
#   RUNS=data/runs-20x scripts/ship_models.sh alibi mep   # only these (listed in the index), from RUNS
#   REPORT=0 scripts/ship_models.sh   # skip `attnlab report`
#   MODELS=seeds RUNS=data/runs-20x scripts/ship_models.sh gla-seed1   # an extra seed: kept in seeds/ (its
#     own index.json), averaged into docs/results.md by `attnlab report`, not shipped to the page
#   MODELS=www/models/len512 RUNS=data/runs-512 scripts/ship_models.sh mep alibi   # another collection
#     (its own index.json; runs trained at another length; the report goes to REPORT_OUT, default
#     docs/results-<folder>.md, with REPORT_ARGS such as --text and --lengths, its cache to
#     data/cache/report-<folder>; the page lists its models once www/models/index.json names the
#     folder under "collections")
# The report keeps each model's measurement in REPORT_CACHE (default data/cache/report) and measures
# again only the models whose files changed (or all of them after a change to the measuring code).
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNLAB=${ATTNLAB:-target/release/attnlab}
RUNS=${RUNS:-data/runs}
MODELS=${MODELS:-www/models}
MODELS=${MODELS#./}; MODELS=${MODELS%/}  # one spelling per folder (the budget and report cases below)
BUDGET=$((80 * 1000 * 1000))  # 80 MB (issue 14): what the page ships; seeds/ is outside it
names=$(grep -o '"name": *"[a-z0-9-]*"' "$MODELS/index.json" | sed 's/.*"\([a-z0-9-]*\)"$/\1/')
ship=("$@")
[ "$#" -gt 0 ] || read -r -a ship <<< "$(echo $names)"
for name in "${ship[@]}"; do
  grep -qx "$name" <<< "$names" || { echo "$name is not listed in $MODELS/index.json"; exit 1; }
  [ -f "$RUNS/$name/model.safetensors" ] || { echo "missing run $RUNS/$name (train it with scripts/train_shipped.sh)"; exit 1; }
done
for name in "${ship[@]}"; do
  "$ATTNLAB" convert --model "$RUNS/$name" --out "$MODELS/$name" --dtype f16 --force | head -1
done
# Each shipped model's description states its training budget, read from its history.json: the
# schedule's steps × batch × length, what `attnlab report` compares runs on (the sentence "Trained
# on X tokens (Y per parameter)." is replaced or appended; a CLI test checks it).
python3 - "$MODELS" "${ship[@]}" <<'PY'
import json, re, sys
folder = sys.argv[1]
path = f"{folder}/index.json"
index = json.load(open(path))
for m in index["models"]:
    if m["name"] not in sys.argv[2:]:
        continue
    try:
        h = json.load(open(f"{folder}/{m['name']}/history.json"))
    except FileNotFoundError:  # an initial checkpoint: not trained
        continue
    try:
        o = h["options"]
        tokens, params = o["steps"] * o["batch"] * o["seq_len"], h["num_params"]
    except KeyError as e:
        sys.exit(f"{folder}/{m['name']}/history.json has no {e}: not written by `attnlab train`?")
    budget = f"Trained on {tokens / 1e6:.1f}M tokens ({tokens / params:.1f} per parameter)."
    text = re.sub(r"\s*Trained on [0-9.]+M tokens \([0-9.]+ per parameter\)\.", "", m["description"])
    m["description"] = f"{text} {budget}"
open(path, "w").write(json.dumps(index, indent=2, ensure_ascii=False) + "\n")
PY
# One shared tokenizer beside index.json instead of a copy per folder (the loaders fall back to it).
cp "${DATA:-data/brown}/tokenizer.json" "$MODELS/tokenizer.json"
for name in $names; do
  if cmp -s "$MODELS/$name/tokenizer.json" "$MODELS/tokenizer.json"; then
    rm "$MODELS/$name/tokenizer.json"
  fi
done
# The budget covers everything shipped to the page: www/models (with its collections) and a collection
# outside it; the extra seeds in seeds/ stay in the repository for the report and are not shipped.
case "$MODELS" in www/models | www/models/* | seeds) shipped=(www/models) ;; *) shipped=(www/models "$MODELS") ;; esac
total=$(du -cb "${shipped[@]}" | tail -1 | cut -f1)
echo "${shipped[*]}: $total bytes (budget $BUDGET)"
[ "$total" -le "$BUDGET" ] || { echo "over the 80 MB budget"; exit 1; }
if [ "${REPORT:-1}" = 1 ] && [ "$MODELS" != www/models ] && [ "$MODELS" != seeds ]; then
  # shellcheck disable=SC2086  # REPORT_ARGS is a list of flags
  "$ATTNLAB" report --models "$MODELS" --out "${REPORT_OUT:-docs/results-$(basename "$MODELS").md}" \
    --cache "${REPORT_CACHE:-data/cache/report-$(basename "$MODELS")}" ${REPORT_ARGS:-}
elif [ "${REPORT:-1}" = 1 ]; then
  # TransNormer Table 7 (speed and memory against length): one single-threaded bench per model.
  mkdir -p docs/results/bench
  for name in transnormer linear-elu alibi; do
    RAYON_NUM_THREADS=1 "$ATTNLAB" bench --model "www/models/$name" --contexts 512,1024,2048,4096 \
      --out "docs/results/bench/$name.json" >/dev/null
  done
  "$ATTNLAB" report --cache "${REPORT_CACHE:-data/cache/report}"
fi
