# shellcheck shell=bash
# Helpers shared by scripts/serve.sh, scripts/test.sh and the device scripts. Sourced, not executed.
#
# Every ensure_* function is idempotent: it checks first and installs only what is missing or at
# the wrong version, so a second run does no network or compile work.

readonly WASM_TARGET="wasm32-unknown-unknown"

# rustup installs cargo here; make sure it is found even in a bare CI shell.
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

ensure_cargo() {
    command -v cargo >/dev/null 2>&1 || die "cargo not found: install the Rust toolchain (rustup) first"
}

# The cargo target directory (CARGO_TARGET_DIR, a config's build.target-dir, or ./target).
cargo_target_dir() {
    local dir
    dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
    [[ -n "$dir" ]] || die "cannot find the cargo target directory (cargo metadata)"
    printf '%s\n' "$dir"
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
    # Wait for another apt/dpkg run (e.g. unattended upgrades) instead of failing at once.
    local apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
    "${apt[@]}" update -q
    "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"
}

# node and npm for the browser tests: Debian's packages, only when no node is installed (a newer
# node from elsewhere, e.g. NodeSource, is kept).
ensure_node() {
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
        info "node $(node --version): present"
        return
    fi
    if command -v node >/dev/null 2>&1; then
        die "node is installed without npm: install npm for it (tests/e2e needs npm ci)"
    fi
    ensure_apt_packages nodejs npm
}

# On a lent GPU machine (the device tool): unpack the Vulkan and glvnd loaders carried in .gl/
# (Debian packages, see the tool's README) when none is installed, and point the loader at the
# NVIDIA driver's ICD where the machine keeps it.
vulkan_on_lent_gpu() {
    if [[ -d .gl ]] && ! ldconfig -p | grep -q libvulkan.so.1; then
        local f
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    if [[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]]; then
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    fi
}
