#!/usr/bin/env bash
# Fuzz attnlab-core's loaders with cargo-fuzz on the stable toolchain. See docs/fuzzing.md.
#
#   fuzz/run.sh [SECONDS] [TARGET...]   build, seed (if fuzz/corpus/ is missing), then fuzz each
#                                       TARGET (default: all four) for SECONDS (default 60) and
#                                       print a results table; logs in fuzz/logs/<target>.log,
#                                       crashing inputs in fuzz/artifacts/<target>/
#   fuzz/run.sh --replay [TARGET...]    run every saved reproducer in fuzz/regressions/<target>/
#                                       once (exit status 1 if any still fails; strict-* files
#                                       run with ATTNLAB_FUZZ_STRICT=1)
#
# Environment: FUZZ_SANITIZER=address|none (default address; `none` builds into
# fuzz/target/san-none so that both builds are kept),
# FUZZ_TIMEOUT (seconds per input before libFuzzer reports a timeout, default 10),
# FUZZ_RSS_MB (memory limit, default 2048), FUZZ_ARGS (extra libFuzzer flags).
set -uo pipefail

cd "$(dirname "$0")/.."
# With a sanitizer, cargo-fuzz passes the nightly-only -Zsanitizer=... to rustc; RUSTC_BOOTSTRAP=1
# lets the stable compiler accept it (harmless, and not needed, with FUZZ_SANITIZER=none).
export RUSTC_BOOTSTRAP=1
SAN="${FUZZ_SANITIZER:-address}"
TDIR=()
[[ "$SAN" != address ]] && TDIR=(--target-dir "fuzz/target/san-$SAN")
ALL_TARGETS=(fuzz_config fuzz_safetensors fuzz_tokenizer fuzz_hf)

dict_for() {
    case "$1" in
        fuzz_config) echo fuzz/dicts/config.dict ;;
        fuzz_safetensors) echo fuzz/dicts/safetensors.dict ;;
        fuzz_tokenizer) echo fuzz/dicts/tokenizer.dict ;;
        fuzz_hf) echo fuzz/dicts/hf.dict ;;
    esac
}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
    exit 2
fi

if [[ "${1:-}" == "--replay" ]]; then
    shift
    targets=("$@")
    [[ ${#targets[@]} -eq 0 ]] && targets=("${ALL_TARGETS[@]}")
    cargo fuzz build -s "$SAN" "${TDIR[@]}" || exit 2
    status=0
    for t in "${targets[@]}"; do
        shopt -s nullglob
        files=(fuzz/regressions/"$t"/*)
        shopt -u nullglob
        [[ ${#files[@]} -eq 0 ]] && { echo "$t: no reproducers"; continue; }
        for f in "${files[@]}"; do
            [[ "$(basename "$f")" == README* ]] && continue
            # strict-* reproducers only fail with the exact-round-trip check of fuzz_config on.
            strict=0
            [[ "$(basename "$f")" == strict-* ]] && strict=1
            if ATTNLAB_FUZZ_STRICT=$strict cargo fuzz run -s "$SAN" "${TDIR[@]}" "$t" "$f" -- \
                -timeout="${FUZZ_TIMEOUT:-10}" >"/tmp/attnlab-replay.$$" 2>&1; then
                echo "$t: $f: ok (no panic)"
            else
                echo "$t: $f: FAILS"
                grep -m1 -E "panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer" "/tmp/attnlab-replay.$$" | sed 's/^/    /'
                status=1
            fi
        done
    done
    rm -f "/tmp/attnlab-replay.$$"
    exit $status
fi

SECS="${1:-60}"
[[ $# -gt 0 ]] && shift
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${ALL_TARGETS[@]}")

echo "== build (sanitizer: $SAN)"
cargo fuzz build -s "$SAN" "${TDIR[@]}" || exit 2

for t in "${targets[@]}"; do
    if [[ ! -d fuzz/corpus/$t ]] || [[ -z "$(ls -A "fuzz/corpus/$t")" ]]; then
        echo "== seed corpora (fuzz/corpus/ missing or empty)"
        cargo run --quiet --manifest-path fuzz/Cargo.toml --example seed || exit 2
        break
    fi
done

mkdir -p fuzz/logs
summary=()
for t in "${targets[@]}"; do
    log="fuzz/logs/$t.log"
    echo "== fuzz $t for ${SECS}s (log: $log)"
    # One in-process fuzzing job (no -jobs/-workers: they spawn extra processes and write
    # fuzz-N.log files into the working directory).
    # shellcheck disable=SC2086
    cargo fuzz run -s "$SAN" "${TDIR[@]}" "$t" "fuzz/corpus/$t" -- \
        -max_total_time="$SECS" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_MB:-2048}" \
        -dict="$(dict_for "$t")" -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1
    rc=$?
    execs=$(grep -m1 '^stat::number_of_executed_units' "$log" | awk '{print $2}')
    eps=$(grep -m1 '^stat::average_exec_per_sec' "$log" | awk '{print $2}')
    last=$(grep -E '^#[0-9]+' "$log" | grep 'cov:' | tail -1)
    [[ -z "$execs" ]] && execs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<<"$last")
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
    corp=$(sed -nE 's/.* corp: ([0-9]+\/[0-9]+[a-zA-Z]*).*/\1/p' <<<"$last")
    if [[ $rc -eq 0 ]]; then
        result="no crash"
    else
        result="FAILED (rc $rc): $(grep -m1 -oE 'deadly signal|panicked at [^ ]+|ERROR: libFuzzer: [a-z-]+|ERROR: AddressSanitizer: [a-z-]+' "$log")"
        art=$(grep -m1 -oE 'Test unit written to [^ ]+' "$log" | awk '{print $5}')
        [[ -n "$art" ]] && result="$result; input: $art"
    fi
    summary+=("| $t | ${SECS}s | ${execs:-?} | ${eps:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $result |")
done

echo
echo "| target | time | execs | exec/s | cov | ft | corpus (files/size) | result |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
