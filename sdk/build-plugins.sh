#!/usr/bin/env bash
# Build Sluice guest plugins for wasm32-unknown-unknown.
#
#   sdk/build-plugins.sh [--workspace DIR] [--out DIR] [--target-dir DIR] [--install-toolchain]
#                        [-p PACKAGE]...
#
# --workspace DIR   the plugin workspace or crate to build (default: plugins/)
# --out DIR         where to put <name>.wasm (default: <workspace>/target/wasm)
# --target-dir DIR  where cargo builds, under guest-rustup/ or guest-debian/ (default:
#                   <workspace>/target); share one across crates so std is built once
#                   <name> is the package name without `sluice-plugin-`.
# --install-toolchain  install Debian's guest toolchain with apt-get when
#                   neither route below is available (needs root).
# -p PACKAGE        build only these packages (default: the whole workspace)
#
# Two routes, picked in this order:
# 1. rustup with the wasm32-unknown-unknown target installed: plain
#    `cargo build --release --target wasm32-unknown-unknown`.
# 2. Debian's rustc-web (rustc, cargo, rust-web-src, lld-22): Debian's cargo
#    and rustc by absolute path (rustup's proxies come first on PATH), std
#    built from source with -Zbuild-std (RUSTC_BOOTSTRAP=1), linked by
#    wasm-ld-22, in a target dir of its own so std is built once.
# The modules are core wasm with the WIT world embedded by wit-bindgen; the
# broker turns them into components on upload.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
workspace="$root/plugins"
out=""
target_base=""
install=0
packages=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --workspace) workspace="$(cd "$2" && pwd)"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --target-dir) mkdir -p "$2" && target_base="$(cd "$2" && pwd)"; shift 2 ;;
        --install-toolchain) install=1; shift ;;
        -p) packages+=(-p "$2"); shift 2 ;;
        *) echo "build-plugins.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -n "$out" ]] || out="$workspace/target/wasm"
[[ -n "$target_base" ]] || target_base="$workspace/target"
[[ ${#packages[@]} -gt 0 ]] || packages=(--workspace)
target=wasm32-unknown-unknown
debian_deps=(rustc-web cargo-web rust-web-src lld-22)

have_rustup_target() {
    command -v rustup >/dev/null 2>&1 &&
        (cd "$workspace" && rustup target list --installed 2>/dev/null) | grep -qx "$target"
}

have_debian_toolchain() {
    [[ -x /usr/bin/rustc && -x /usr/bin/cargo ]] && command -v wasm-ld-22 >/dev/null 2>&1 &&
        /usr/bin/rustc --print target-list 2>/dev/null | grep -qx "$target" &&
        [[ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/src/rust/library" ]]
}

manifest="$workspace/Cargo.toml"
# Cargo's JSON messages name the .wasm files this build made (a shared target dir holds other
# crates' too); diagnostics still go to the terminal.
artifacts="$(mktemp)"
trap 'rm -f "$artifacts"' EXIT
if have_rustup_target; then
    echo "build-plugins.sh: rustup route (target $target installed)" >&2
    target_dir="$target_base/guest-rustup"
    (cd "$workspace" && cargo build --release --target "$target" --manifest-path "$manifest" \
        --target-dir "$target_dir" --message-format=json-render-diagnostics "${packages[@]}") \
        >"$artifacts"
else
    if ! have_debian_toolchain; then
        if [[ $install -eq 1 ]]; then
            echo "build-plugins.sh: installing ${debian_deps[*]} with apt-get" >&2
            apt=(apt-get -o DPkg::Lock::Timeout=600)
            export DEBIAN_FRONTEND=noninteractive
            "${apt[@]}" install -y -qq "${debian_deps[@]}" >&2 </dev/null ||
                { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq "${debian_deps[@]}" >&2 </dev/null; }
        else
            if command -v rustup >/dev/null 2>&1; then
                echo "build-plugins.sh: no wasm32 toolchain: run \`rustup target add $target\`" >&2
            else
                echo "build-plugins.sh: no Rust toolchain for wasm32: install rustup (https://rustup.rs)," >&2
                echo "  then \`rustup target add $target\`" >&2
            fi
            echo "  (or Debian's: \`apt-get install ${debian_deps[*]}\`, or pass --install-toolchain)" >&2
            exit 1
        fi
    fi
    echo "build-plugins.sh: Debian rustc-web route (build-std)" >&2
    target_dir="$target_base/guest-debian"
    (cd "$workspace" && env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 \
        CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld-22 \
        /usr/bin/cargo build --release --target "$target" --manifest-path "$manifest" \
        --target-dir "$target_dir" -Zbuild-std=std,panic_abort \
        --message-format=json-render-diagnostics "${packages[@]}") >"$artifacts"
fi

mkdir -p "$out"
grep -o '"[^"]*/'"$target"'/release/[^"/]*\.wasm"' "$artifacts" | tr -d '"' | sort -u |
while read -r wasm; do
    [[ -e "$wasm" ]] || continue
    name="$(basename "$wasm" .wasm)"
    name="${name#sluice_plugin_}"
    name="${name//_/-}"
    # Copy then rename (a temporary name per process, as test processes may
    # run this concurrently), so a reader never sees half a file.
    cp "$wasm" "$out/.$name.wasm.$$.tmp"
    mv "$out/.$name.wasm.$$.tmp" "$out/$name.wasm"
done
echo "build-plugins.sh: plugins in $out" >&2
