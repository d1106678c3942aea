#!/usr/bin/env bash
# Run every test of attnlab: formatting, clippy, unit/integration/doc tests, the page's wasm build
# and the browser tests. This is exactly what CI runs (.ci/run). Installs missing prerequisites
# first, idempotently (nothing is `cargo install`ed: the site builder is a workspace crate).
#
# Fails fast: the first failing step stops the run and is named on stderr.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

# Nothing below may wait for input.
exec </dev/null
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
export DEBIAN_FRONTEND=noninteractive
if [[ "${CI:-}" == "true" ]]; then
    # One-shot builds on a fresh machine: incremental state and full debuginfo only cost time there.
    export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
    export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
fi

CURRENT_STEP="start"
STEP_START=$SECONDS
SUMMARY=()

finish() {
    local rc=$?
    if ((rc != 0)); then
        printf '\nattnlab test.sh: FAILED at step "%s" (exit code %d)\n' "$CURRENT_STEP" "$rc" >&2
    fi
}
trap finish EXIT

# Starts a step: closes the previous one in the summary and prints a banner.
step() {
    if [[ "$CURRENT_STEP" != "start" ]]; then
        SUMMARY+=("$(printf '%5ds  %s' $((SECONDS - STEP_START)) "$CURRENT_STEP")")
    fi
    CURRENT_STEP="$*"
    STEP_START=$SECONDS
    banner "$*"
}

# ---- Debian packages needed by the tests --------------------------------------------------------
# Add packages here (installed only when missing), e.g. for GPU tests on Mesa lavapipe and the
# browser tests:  mesa-vulkan-drivers libvulkan1 chromium
APT_PACKAGES=(mesa-vulkan-drivers libvulkan1 chromium)
# ---------------------------------------------------------------------------------------------------

step "prerequisites"
ensure_cargo
ensure_components
ensure_wasm_target
ensure_apt_packages "${APT_PACKAGES[@]}"
ensure_node
TARGET_DIR="$(cargo_target_dir)"

step "cargo fmt --check"
cargo fmt --all -- --check

step "clippy (native, all targets)"
cargo clippy --workspace --all-targets -- -D warnings

# Doc tests first, so that the last test-runner summary in the log is the full suite's.
step "doc tests (cargo test --doc)"
cargo test --workspace --doc

TEST_LOG="$(mktemp)"
if cargo nextest --version >/dev/null 2>&1; then
    nextest_args=(--workspace)
    if cargo nextest run --help 2>/dev/null | grep -q -- '--no-tests'; then
        nextest_args+=(--no-tests=fail)
    fi
    step "tests (cargo nextest run)"
    cargo nextest run "${nextest_args[@]}" 2>&1 | tee "$TEST_LOG"
    read -r PASSED FAILED < <(sed -nE 's/.* tests run: ([0-9]+) passed(, ([0-9]+) failed)?.*/\1 \3/p' "$TEST_LOG" | tail -n 1) || true
else
    step "tests (cargo test)"
    cargo test --workspace --lib --bins --tests 2>&1 | tee "$TEST_LOG"
    PASSED=$(sed -nE 's/^test result: .*\. ([0-9]+) passed.*/\1/p' "$TEST_LOG" | awk '{s += $1} END {print s + 0}')
    FAILED=0
fi
PASSED="${PASSED:-0}"
FAILED="${FAILED:-0}"
rm -f "$TEST_LOG"
if ((PASSED == 0)); then
    die "the test runner executed no test"
fi

# attnlab-core and attnlab-gpu are checked for wasm32 here (as attnlab-web's dependencies, with
# debug assertions) and compiled for it by the web-release build below.
step "clippy attnlab-web and attnlab-tune (wasm32)"
cargo clippy -p attnlab-web -p attnlab-tune --target "$WASM_TARGET" -- -D warnings

# The page's own profile, the one attnlab-site builds by default: its cargo build below is a no-op.
step "build attnlab-web and attnlab-tune for wasm32 (web-release profile)"
cargo build -p attnlab-web -p attnlab-tune --target "$WASM_TARGET" --profile web-release

step "end-to-end browser tests (attnlab-site build + headless Chromium)"
# The test step built both binaries (their integration tests run them).
[[ -x "$TARGET_DIR/debug/attnlab" ]] || cargo build -p attnlab-cli
[[ -x "$TARGET_DIR/debug/attnlab-site" ]] || cargo build -p attnlab-site
E2E_LOG="$(mktemp)"
tests/e2e/run.sh "$TARGET_DIR/debug/attnlab" "$TARGET_DIR/debug/attnlab-site" 2>&1 | tee "$E2E_LOG"
E2E_PASSED=$(sed -nE 's/^[^a-z]*pass ([0-9]+)$/\1/p' "$E2E_LOG" | tail -n 1)
E2E_FAILED=$(sed -nE 's/^[^a-z]*fail ([0-9]+)$/\1/p' "$E2E_LOG" | tail -n 1)
rm -f "$E2E_LOG"
PASSED=$((PASSED + ${E2E_PASSED:-0}))
FAILED=$((FAILED + ${E2E_FAILED:-0}))

step "done"
printf '%s\n' "${SUMMARY[@]}"
printf '\nattnlab test.sh: all steps passed in %ds\n' "$SECONDS"
# Plain closing line for CI: the suite's counts.
printf 'tests: %d passed, %d failed\n' "$PASSED" "$FAILED"
