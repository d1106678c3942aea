#!/usr/bin/env bash
# Issue 14 on a lent GPU machine (the `device` tool; docs/bench.md, "The GPU trainer on a real
# GPU"): the GPU trainer's throughput (`attnlab bench --train`), then the budget runs of
# scripts/train_shipped.sh on the GPU in parallel lanes until DEADLINE seconds, packed under $OUT for the trip back (at most
# 8 files of 16 MiB, 64 MiB in all): finished runs as F16 model folders with their history,
# unfinished ones as resumable checkpoints while room is left, most advanced first.
#
# Carried: target/release/attnlab, data/brown, .gl (Debian's Vulkan and glvnd loaders, see the
# device tool's README). www/models stays here (over the tool's 64 MiB).
#
#   OUT=/tmp/out DEADLINE=60 LANES=2 RUNS128="nope sinusoidal" scripts/device_train.sh   # anywhere
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder that comes back}"
A=${ATTNLAB:-target/release/attnlab}
DEADLINE=${DEADLINE:-420}
LANES=${LANES:-12}
STEPS=${STEPS:-11000}
RUNS128=${RUNS128-"nope sinusoidal linear-elu transnormer regla gla fast-decay lrpe lrpe-theta-fixed
  alibi-h7 alibi-h0 mep-exp-half mep-exp-gauss regla-fig4 gla-fig4 regla-seed1 gla-seed1
  fast-decay-seed1 linear-elu-seed1 transnormer-seed1 alibi-seed2 mep-seed2"}
RUNS512=${RUNS512-"mep alibi"}
LOG=$OUT/log.txt
mkdir -p "$OUT/logs"
exec > >(tee -a "$LOG") 2>&1
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
vulkan_on_lent_gpu
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
nproc
start=$(date +%s)

# 1. Throughput: the 1.1M preset (random weights, the shipped size), candle and the WGSL trainer
#    side by side in one run. A failure here (no adapter) ends the script before any training.
bench() {  # name variant batch seq_len
  "$A" init --variant "$2" --tokenizer data/brown/tokenizer.json --out "/tmp/bench-$2" --force >/dev/null &&
    "$A" --json bench --train --model "/tmp/bench-$2" --train-batch "$3" --train-seq-len "$4" \
      --train-steps "${BENCH_STEPS:-5}" >"$OUT/logs/bench-$1.json"
}
if [ "${BENCH:-1}" = 1 ]; then
  bench alibi-16x128 alibi 16 128
  cat "$OUT/logs/bench-alibi-16x128.json"
  python3 -c 'import json,sys; sys.exit("tokens_per_s" not in json.load(open(sys.argv[1]))["gpu"])' \
    "$OUT/logs/bench-alibi-16x128.json" || { echo "the GPU trainer did not run"; exit 1; }
  for v in kerple-log regla gla lrpe transnormer; do bench "$v-16x128" "$v" 16 128; done
  bench alibi-64x128 alibi 64 128
  bench mep-4x512 mep 4 512
  echo "bench: $(($(date +%s) - start)) s"
fi

# 2. The budget runs, lanes sharing the GPU, until the deadline (a killed run keeps its last
#    checkpoint: they are written by renames).
export ATTNLAB=$A DEVICE=${DEVICE:-gpu} STEPS
t0=$(date +%s)
# GPU utilization while the lanes run (is the GPU or the host the limit?)
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 20 >"$OUT/logs/smi.csv" 2>/dev/null &
smi=$!
lanes128=  # (train_shipped.sh with no names would train every model: an empty list trains none)
if [ -n "${RUNS128// /}" ]; then
  # shellcheck disable=SC2086
  RUNS=data/runs-20x LANES=$LANES timeout "$DEADLINE" scripts/train_shipped.sh $RUNS128 &
  lanes128=$!
fi
lanes512=
if [ -n "${RUNS512// /}" ]; then
  # shellcheck disable=SC2086
  RUNS=data/runs-512 SEQ_LEN=512 LANES=${LANES512:-2} timeout "$DEADLINE" scripts/train_shipped.sh $RUNS512 &
  lanes512=$!
fi
# shellcheck disable=SC2086
[ -z "$lanes128$lanes512" ] || wait $lanes128 $lanes512  # (a bare `wait` would also wait for the tee of the log)
pkill -TERM -f "attnlab --json train" && sleep 3
kill "$smi" 2>/dev/null
echo "training: $(($(date +%s) - t0)) s"

# 3. Pack: finished runs (F16), logs, then checkpoints of unfinished runs while room is left.
python3 - "$A" "$STEPS" "$OUT" "${MAX_TARS:-6}" <<'EOF'
import json, os, subprocess, sys, tarfile, glob, shutil
attnlab, steps, out, max_tars = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
LIMIT, TOTAL = 15 * 2**20, 60 * 2**20
def step_of(run):
    try:
        return json.load(open(os.path.join(run, "checkpoint", "state.json")))["step"]
    except Exception:
        return 0
def size(p):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)
shutil.rmtree("/tmp/pack", ignore_errors=True)  # (a warm machine keeps the last call's)
items, partial = [], []
for run in sorted(glob.glob("data/runs-*/*/")):
    run = run.rstrip("/")
    group, name = run.split("/")[1], run.split("/")[2]
    if name.endswith("-init"):
        continue
    s = step_of(run)
    for f in glob.glob(f"data/{group}/{name}.*"):
        shutil.copy(f, f"{out}/logs/{group}.{os.path.basename(f)}")
    if s >= steps:
        dst = f"/tmp/pack/{group}/{name}"
        subprocess.run([attnlab, "convert", "--model", run, "--out", dst, "--dtype", "f16", "--force"],
                       check=True, stdout=subprocess.DEVNULL)
        for f in ["history.json", "best/validation.json"]:
            if os.path.exists(f"{run}/{f}"):
                shutil.copy(f"{run}/{f}", f"{dst}/{os.path.basename(f)}")
        os.remove(f"{dst}/tokenizer.json")
        items.append((dst, f"{group}/{name}"))
    elif s > 0:
        partial.append((s, run, f"{group}/{name}.partial"))
    print(f"{group}/{name}: step {s}")
for s, run, arc in sorted(partial, reverse=True):
    dst = f"/tmp/pack/{arc}"
    shutil.copytree(f"{run}/checkpoint", f"{dst}/checkpoint")
    shutil.copy(f"{run}/history.json", dst)
    items.append((dst, arc))
bins, used = [], 0
for path, arc in items:
    n = size(path)
    if used + n > TOTAL:
        print(f"no room for {arc} ({n} bytes)")
        continue
    for b in bins:
        if b[0] + n <= LIMIT:
            b[0] += n; b[1].append((path, arc)); break
    else:
        if len(bins) == max_tars or n > LIMIT:
            print(f"no room for {arc} ({n} bytes)")
            continue
        bins.append([n, [(path, arc)]])
    used += n
for i, (_, members) in enumerate(bins):
    with tarfile.open(f"{out}/runs-{i}.tar.gz", "w:gz", compresslevel=1) as t:
        for path, arc in members:
            t.add(path, arcname=arc)
    print(f"runs-{i}.tar.gz: {', '.join(a for _, a in members)}")
EOF
cd "$OUT" && tar -czf logs.tar.gz logs && rm -r logs
ls -l "$OUT"
echo "total: $(($(date +%s) - start)) s"
