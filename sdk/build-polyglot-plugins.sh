#!/usr/bin/env bash
# Build the Python and JavaScript plugins of a plugin tree into components, next to the
# Rust ones that sdk/build-plugins.sh builds.
#
#   sdk/build-polyglot-plugins.sh [--plugins DIR] [--out DIR]
#
# --plugins DIR  the tree to search (default: plugins/); a plugin is a directory with a
#                pyproject.toml holding [tool.sluice] or a package.json with a "sluice" key
# --out DIR      where to put <name>.wasm (default: <plugins>/target/wasm, as build-plugins.sh)
#
# <name> is the directory's name, `hostile-` first for plugins under hostile/ (as the Rust
# hostile plugins: plugins/hostile/python-memory-bomb -> hostile-python-memory-bomb.wasm).
# A plugin is rebuilt only when a file of it, the guest SDKs, the WIT or the toolchain pins
# changed since its .wasm was written (a Python build takes 5-15 s, a JavaScript one 5-30 s).
# Kept apart from build-plugins.sh, which the host's tests run once per test process: the
# guest toolchains need node and python and a first install of about 30 s.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
plugins="$root/plugins"
out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --plugins) plugins="$(cd "$2" && pwd)"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "build-polyglot-plugins.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ -n "$out" ]] || out="$plugins/target/wasm"
mkdir -p "$out"

# What every guest build depends on besides its own directory.
shared=("$root/wit" "$root/sdk/python" "$root/sdk/js" "$root/sdk/guest-tools/requirements.txt"
    "$root/sdk/guest-tools/package-lock.json" "$root/sdk/build-guest.sh")

built=0 fresh=0
while IFS= read -r marker; do
    dir="$(dirname "$marker")"
    case "$marker" in
        */pyproject.toml) grep -q '^\[tool\.sluice\]' "$marker" || continue ;;
        */package.json) grep -q '"sluice"' "$marker" || continue ;;
    esac
    name="$(basename "$dir")"
    [[ "$dir" == "$plugins/hostile/"* ]] && name="hostile-$name"
    wasm="$out/$name.wasm"
    if [[ -f "$wasm" ]] && [[ -z "$(find "$dir" "${shared[@]}" -newer "$wasm" -type f \
        -not -path '*/target/*' -not -path '*/node_modules/*' -not -path '*/__pycache__/*' \
        -not -path '*/.pytest_cache/*' -print -quit)" ]]; then
        fresh=$((fresh + 1))
        continue
    fi
    "$root/sdk/build-guest.sh" "$dir" "$wasm"
    built=$((built + 1))
done < <(find "$plugins" \( -name target -o -name node_modules \) -prune -o \
    \( -name pyproject.toml -o -name package.json \) -print | sort)
echo "build-polyglot-plugins.sh: $built built, $fresh up to date, in $out" >&2
