#!/usr/bin/env bash
# Train the shipped checkpoints (issue 3): every model gets the same size preset (~1.1–1.25M params),
# training length SEQ_LEN (128) and the same token budget (STEPS × 2,048 tokens of data/brown), seeded.
# Runs two trainings at a time with one thread each (2-core machine: ~1.6× the throughput of one
# two-thread run). Runs go to data/runs/<name> (resumable: a rerun continues from the checkpoint);
# scripts/ship_models.sh then writes the f16 model folders under www/models/.
#
#   scripts/train_shipped.sh            # all models
#   scripts/train_shipped.sh alibi mep  # some of them
#   NAME-seedK trains NAME with seed K (init and data order): a further seed for `attnlab report`
#   NAME with $CONFIGS/NAME.json trains that config (the MEP Table 3/4 ablations)
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNLAB=${ATTNLAB:-target/release/attnlab}
STEPS=${STEPS:-500}
DATA=${DATA:-data/brown}
RUNS=${RUNS:-data/runs}
LANES=${LANES:-2}
# Where the steps run: cpu (candle, THREADS threads per lane) or gpu (the WGSL trainer; with a GPU, many
# lanes share it: scripts/device_train.sh).
DEVICE=${DEVICE:-cpu}
# Threads per CPU lane (candle's rayon pool); one run alone on this 2-core machine: THREADS=2 LANES=1.
THREADS=${THREADS:-1}
# Training length; the batch keeps 2,048 tokens per step (16 × 128, 4 × 512: MEP's L_train = 512 runs).
SEQ_LEN=${SEQ_LEN:-128}
if [ $((2048 % SEQ_LEN)) -ne 0 ]; then echo "SEQ_LEN must divide 2048, not $SEQ_LEN" >&2; exit 2; fi
# Ablation configs of this length (their train_context must equal SEQ_LEN): scripts/configs at 128,
# scripts/configs/len512 at 512 (MEP Table 4 at the paper's length: alibi-h2, alibi-h9; Table 3's mixes).
if [ "$SEQ_LEN" = 128 ]; then CONFIGS=${CONFIGS:-scripts/configs}; else CONFIGS=${CONFIGS:-scripts/configs/len$SEQ_LEN}; fi
# Order: slow (linear-family) runs interleaved with fast ones so both lanes stay busy.
ALL=(regla alibi gla mep lrpe nope transnormer rope linear-elu kerple-log t5 sinusoidal mep-param gla-fig4 regla-fig4
  fast-decay alibi-h7 alibi-h0 mep-exp-half mep-exp-gauss lrpe-theta-fixed
  alibi-seed1 mep-seed1 regla-seed1 fast-decay-seed1 gla-seed1 transnormer-seed1 kerple-log-seed1 mep-param-seed1
  linear-elu-seed1 rope-seed1 t5-seed1 nope-seed1 lrpe-seed1 lrpe-theta-fixed-seed1
  mep-seed2 alibi-seed2 rope-seed2 regla-seed2 t5-seed2 kerple-log-seed2 mep-param-seed2 nope-seed2 gla-seed2
  fast-decay-seed2 linear-elu-seed2 transnormer-seed2 lrpe-seed2 lrpe-theta-fixed-seed2)
MODELS=("${ALL[@]}")
[ "$#" -gt 0 ] && MODELS=("$@")
mkdir -p "$RUNS"

train_one() {
  local name=$1 args=() seed=0
  case "$name" in
    # ReGLA Fig. 4: gate biases at ±6 (activations at ~0 and ~1) before training; the initial model
    # is kept as <name>-init. GLA uses a plain sigmoid gate here (normalizer 1), like the paper's
    # Fast Decay baseline; the shipped `gla` keeps fla's normalizer 16.
    gla-fig4 | regla-fig4)
      local base=${name%-fig4} extra=()
      [ "$base" = gla ] && extra=(--gla-normalizer 1)
      if [ ! -f "$RUNS/$name-init/model.safetensors" ]; then
        "$ATTNLAB" init --variant "$base" --gate-bias-init 6 "${extra[@]}" \
          --tokenizer "$DATA/tokenizer.json" --out "$RUNS/$name-init" --force >/dev/null
      fi
      args=(--init "$RUNS/$name-init") ;;
    # Seed K of NAME: a catalog variant, or an ablation with its own config.
    *-seed[0-9]*)
      local base=${name%-seed*}
      seed=${name##*-seed}
      if [ -f "$CONFIGS/$base.json" ]; then args=(--config "$CONFIGS/$base.json"); else args=(--variant "$base"); fi ;;
    # Ablations with their own config (MEP Table 4 uniform slopes, Table 3 kernel mixes, LRPE θ fixed).
    *) if [ -f "$CONFIGS/$name.json" ]; then args=(--config "$CONFIGS/$name.json")
       else args=(--variant "$name"); fi ;;
  esac
  local resume=()
  [ -f "$RUNS/$name/checkpoint/state.json" ] && resume=(--resume)
  RAYON_NUM_THREADS=$THREADS "$ATTNLAB" --json train "${args[@]}" "${resume[@]}" --data "$DATA" --out "$RUNS/$name" \
    --steps "$STEPS" --batch $((2048 / SEQ_LEN)) --seq-len "$SEQ_LEN" --warmup 50 --val-every 100 --val-batches 8 --seed "$seed" --device "$DEVICE" \
    >"$RUNS/$name.json" 2>"$RUNS/$name.log" && echo "trained $name" || { echo "FAILED $name (see $RUNS/$name.log)"; return 1; }
}
export -f train_one
export ATTNLAB STEPS DATA RUNS SEQ_LEN DEVICE THREADS CONFIGS
printf '%s\n' "${MODELS[@]}" | xargs -P "$LANES" -I{} bash -c 'train_one {}'
