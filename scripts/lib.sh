# shellcheck shell=bash
# Helpers shared by scripts/serve.sh and scripts/test.sh. Sourced, not executed.
#
# Every ensure_* function is idempotent: it checks first and installs only what is missing or at
# the wrong version, so a second run does no network or compile work.

# Tools pinned by the project. trunk 0.22 needs a newer rustc than ours; wasm-bindgen-cli must equal
# the `wasm-bindgen` crate version in Cargo.lock exactly (the crate is pinned with `=`).
readonly TRUNK_VERSION="0.21.14"
readonly WASM_TARGET="wasm32-unknown-unknown"

# `cargo install` puts binaries here; make sure they are found even in a bare CI shell.
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

banner() {
    printf '\n==== %s ====\n' "$*"
}

info() {
    printf 'attnlab: %s\n' "$*"
}

die() {
    printf 'attnlab: error: %s\n' "$*" >&2
    exit 1
}

# The wasm-bindgen version the build links against: from Cargo.lock, else the workspace pin.
wasm_bindgen_version() {
    local v=""
    if [[ -f Cargo.lock ]]; then
        v="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
    fi
    if [[ -z "$v" ]]; then
        v="$(sed -n 's/^wasm-bindgen = "=\([0-9.]*\)".*/\1/p' Cargo.toml | head -n 1)"
    fi
    [[ -n "$v" ]] || die "cannot find the wasm-bindgen version in Cargo.lock or Cargo.toml"
    printf '%s\n' "$v"
}

ensure_cargo() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (rustup) first"
}

ensure_components() {
    local missing=()
    cargo fmt --version >/dev/null 2>&1 || missing+=(rustfmt)
    cargo clippy --version >/dev/null 2>&1 || missing+=(clippy)
    if ((${#missing[@]} > 0)); then
        command -v rustup >/dev/null 2>&1 || die "missing ${missing[*]} and no rustup to add them"
        info "adding rustup components: ${missing[*]}"
        rustup component add "${missing[@]}"
    fi
}

ensure_wasm_target() {
    if rustc --print sysroot >/dev/null 2>&1 &&
        [[ -d "$(rustc --print sysroot)/lib/rustlib/$WASM_TARGET/lib" ]]; then
        info "rust target $WASM_TARGET: present"
        return
    fi
    command -v rustup >/dev/null 2>&1 || die "the $WASM_TARGET target is missing and rustup is not available"
    info "adding rust target $WASM_TARGET"
    rustup target add "$WASM_TARGET"
}

# Prints the version a tool reports (second word of `tool --version`), or nothing.
tool_version() {
    local out
    out="$("$@" --version 2>/dev/null | head -n 1)" || return 0
    printf '%s\n' "$out" | awk '{ print $2 }'
}

ensure_trunk() {
    local have
    have="$(tool_version trunk)"
    if [[ "$have" == "$TRUNK_VERSION" ]]; then
        info "trunk $TRUNK_VERSION: present"
        return
    fi
    info "installing trunk $TRUNK_VERSION (found: ${have:-none}; takes ~15 minutes on 2 cores)"
    cargo install trunk --version "$TRUNK_VERSION" --locked --force
}

ensure_wasm_bindgen() {
    local want have
    want="$(wasm_bindgen_version)"
    have="$(tool_version wasm-bindgen)"
    if [[ "$have" == "$want" ]]; then
        info "wasm-bindgen-cli $want: present"
        return
    fi
    info "installing wasm-bindgen-cli $want (found: ${have:-none})"
    if ! cargo install wasm-bindgen-cli --version "$want" --locked --force; then
        # The lockfile published with 0.2.130 pins a webpki-roots release that the registry does
        # not serve; a fresh resolution of the same version works.
        info "the --locked install failed; retrying with a fresh dependency resolution"
        cargo install wasm-bindgen-cli --version "$want" --force
    fi
}

# Debian packages: installs only those not already installed (no apt-get update otherwise).
ensure_apt_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        (($# == 0)) || info "apt packages present: $*"
        return
    fi
    command -v apt-get >/dev/null 2>&1 || die "missing packages ${missing[*]} and no apt-get"
    local sudo=()
    if ((EUID != 0)); then
        command -v sudo >/dev/null 2>&1 || die "missing packages ${missing[*]}: run as root"
        sudo=(sudo)
    fi
    info "installing apt packages: ${missing[*]}"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}
