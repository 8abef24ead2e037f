#!/usr/bin/env bash
# Build one Sluice plugin, in whatever language it is written, into a component.
#
#   sdk/build-guest.sh DIR [OUT.wasm]     build the plugin in DIR (default OUT: DIR/target/wasm/<dir>.wasm)
#   sdk/build-guest.sh --install [python|js]   only install the pinned guest toolchain(s)
#   sdk/build-guest.sh --lang DIR         print the language of DIR (rust, python or js)
#
# The language is read off DIR:
#   Cargo.toml                          Rust: built by sdk/build-plugins.sh (a core module
#                                       that the broker turns into a component on upload)
#   pyproject.toml with [tool.sluice]   Python: componentize-py, entry module `app`
#   package.json with a "sluice" key    JavaScript: componentize-js, entry "main" (default
#                                       plugin.js), bundled first with rolldown
# The kind (partitioner, filter, transform, validator) is the marker's `kind`; it names the
# world of wit/sluice-plugin.wit. A plugin may bring its own WIT directory (`wit` and `world`
# in the marker; only the hostile plugins do, to import what the broker denies): it is built
# with ours as a dependency. A JS marker's `disable` lists the componentize-js WASI features to
# leave out.
#
# The SDK modules: a plugin made by `sluice plugin new` outside a Sluice checkout carries its
# copy in DIR/.sluice-sdk/sdk/{python,js} and is built with it; otherwise sdk/python (the JS
# entry names its SDK module by path, and rolldown follows it).
#
# Toolchains, pinned, installed on first use and reused (a stamp holds the hash of the
# pin file, so a changed pin reinstalls): Python packages from sdk/guest-tools/requirements.txt
# into sdk/guest-tools/.venv, npm packages from sdk/guest-tools/package-lock.json
# (`npm ci`) into sdk/guest-tools/node_modules. SLUICE_GUEST_TOOLS moves both (a copy of
# the pin files is made there). Needs python3 (3.11+) with venv and pip, node 20+ and npm;
# without them it says what to install.
#
# SLUICE_JS_DISABLE: WASI features componentize-js leaves out when the marker does not say
# (default "http fetch-event": no outbound HTTP; stdio, clocks and random stay).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pins="$root/sdk/guest-tools"
tools="${SLUICE_GUEST_TOOLS:-$pins}"
wit="$root/wit/sluice-plugin.wit"
sdk_py="$root/sdk/python"

say() { echo "build-guest.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# need_python / need_node: the interpreter a language's build runs, or what to install.
need_python() {
    command -v python3 >/dev/null 2>&1 && python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "Python plugins need python3 3.11 or later, with venv and pip (Debian: apt-get install python3 python3-venv; else https://www.python.org/downloads/)"
}
need_node() {
    command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
        node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
        die "JavaScript plugins need node 20 or later and npm (Debian: apt-get install nodejs npm; else https://nodejs.org/en/download)"
}

# Reinstall only when the pin file changed since the last install into $2.
stale() { [[ ! -f "$2/.stamp" ]] || [[ "$(sha256sum <"$1")" != "$(cat "$2/.stamp")" ]]; }

install_python() {
    local venv="$tools/.venv"
    need_python
    if stale "$pins/requirements.txt" "$venv"; then
        say "installing the Python guest toolchain into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check --no-deps \
            -r "$pins/requirements.txt" >&2
        sha256sum <"$pins/requirements.txt" >"$venv/.stamp"
    fi
}

install_js() {
    local modules="$tools/node_modules"
    need_node
    if stale "$pins/package-lock.json" "$modules"; then
        say "installing the JavaScript guest toolchain into $modules"
        if [[ "$tools" != "$pins" ]]; then
            mkdir -p "$tools"
            cp "$pins/package.json" "$pins/package-lock.json" "$tools/"
        fi
        (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error >&2)
        sha256sum <"$pins/package-lock.json" >"$modules/.stamp"
    fi
}

lang_of() {
    local dir="$1"
    if [[ -f "$dir/Cargo.toml" ]]; then
        echo rust
    elif [[ -f "$dir/pyproject.toml" ]] && grep -q '^\[tool\.sluice\]' "$dir/pyproject.toml"; then
        echo python
    elif [[ -f "$dir/package.json" ]] && need_node &&
        node -e 'process.exit(require(process.argv[1]).sluice ? 0 : 1)' "$dir/package.json"; then
        echo js
    else
        die "$dir: no Cargo.toml, pyproject.toml with [tool.sluice], or package.json with \"sluice\""
    fi
}

# marker_py DIR KEY DEFAULT: a key of [tool.sluice] in DIR/pyproject.toml.
marker_py() {
    python3 -c 'import sys, tomllib
t = tomllib.load(open(sys.argv[1], "rb")).get("tool", {}).get("sluice", {})
print(t.get(sys.argv[2], sys.argv[3]))' "$1/pyproject.toml" "$2" "$3"
}

# marker_js DIR KEY DEFAULT: a key of "sluice" in DIR/package.json ("main": the top level);
# a list is printed as words.
marker_js() {
    node -e 'const p = require(process.argv[1]); const k = process.argv[2];
const v = (k === "main" ? p.main : p.sluice[k]) ?? process.argv[3];
console.log(Array.isArray(v) ? v.join(" ") : v)' \
        "$1/package.json" "$2" "$3"
}

wit_version() { sed -n 's/^package sluice:plugin@\(.*\);$/\1/p' "$wit"; }

# wit_of DIR WITDIR STAGE: the WIT to build against. Without a plugin WIT dir, ours; with
# one, a copy of it in STAGE with ours as a dependency, its `sluice:plugin/...@V` names
# rewritten to our version (so a WIT bump needs no edit there).
wit_of() {
    local dir="$1" own="$2" stage="$3" version
    if [[ -z "$own" ]]; then
        echo "$wit"
        return
    fi
    version="$(wit_version)"
    mkdir -p "$stage/wit/deps/sluice"
    cp -r "$dir/$own/." "$stage/wit/"
    cp "$wit" "$stage/wit/deps/sluice/"
    find "$stage/wit" -maxdepth 1 -name '*.wit' -exec \
        sed -i "s|sluice:plugin/\([a-z-]*\)@[0-9][0-9.]*|sluice:plugin/\1@$version|g" {} +
    echo "$stage/wit"
}

check_kind() {
    case "$1" in
        partitioner | filter | transform | validator) ;;
        *) die "kind \`$1\` is not one of partitioner, filter, transform, validator" ;;
    esac
}

build_python() {
    local dir="$1" out="$2" kind world stage witp sdk="$sdk_py"
    need_python
    if [[ -d "$dir/.sluice-sdk/sdk/python" ]]; then
        sdk="$dir/.sluice-sdk/sdk/python"
    fi
    kind="$(marker_py "$dir" kind "")"
    check_kind "$kind"
    world="$(marker_py "$dir" world "$kind")"
    stage="$(mktemp -d)"
    witp="$(wit_of "$dir" "$(marker_py "$dir" wit "")" "$stage")"
    install_python
    # An empty VIRTUAL_ENV keeps the toolchain's own site-packages out of the search path:
    # the component holds the plugin, the SDK and CPython's standard library, nothing else.
    mkdir -p "$stage/venv/lib/python3/site-packages"
    (cd "$dir" && VIRTUAL_ENV="$stage/venv" "$tools/.venv/bin/componentize-py" -q \
        -d "$witp" -w "$world" componentize app -p . -p "$sdk" -o "$out")
    rm -rf "$stage"
}

build_js() {
    local dir="$1" out="$2" kind world witp main stage disable
    kind="$(marker_js "$dir" kind "")"
    check_kind "$kind"
    world="$(marker_js "$dir" world "$kind")"
    stage="$(mktemp -d)"
    witp="$(wit_of "$dir" "$(marker_js "$dir" wit "")" "$stage")"
    main="$(marker_js "$dir" main plugin.js)"
    # WASI features componentize-js leaves out: the marker's "disable", else SLUICE_JS_DISABLE,
    # else no outbound HTTP (stdio, clocks and random stay).
    disable="$(marker_js "$dir" disable "${SLUICE_JS_DISABLE:-http fetch-event}")"
    install_js
    local bin="$tools/node_modules/.bin"
    # componentize-js pre-initializes the module in StarlingMonkey, which sees only the
    # working directory: bundle the entry and what it imports (the SDK) into one file
    # first, keeping the WIT imports (`sluice:plugin/...`, `wasi:...`) as imports.
    # (`jco componentize --bundle` would do both, but fails in jco 1.35.0 with "failed to
    # get path metadata" for any WIT path.)
    cat >"$stage/rolldown.config.mjs" <<CONFIG
export default {
  input: '$dir/$main',
  external: /^(sluice|wasi):/,
  platform: 'neutral',
  output: { file: '$stage/plugin.js', format: 'esm' },
};
CONFIG
    "$bin/rolldown" --config "$stage/rolldown.config.mjs" >/dev/null
    # Imports name the WIT version (`sluice:plugin/host@0.1.0`): build against ours, as
    # componentize-py does for Python (a minor version only adds, wit/README.md).
    sed -i "s|sluice:plugin/\([a-z-]*\)@[0-9][0-9.]*|sluice:plugin/\1@$(wit_version)|g" "$stage/plugin.js"
    # shellcheck disable=SC2086 # a list of words
    (cd "$stage" && "$bin/componentize-js" plugin.js -w "$witp" -n "$world" -d $disable \
        -o "$out" >&2)
    rm -rf "$stage"
}

build_rust() {
    local dir="$1" out="$2" staging
    staging="$(mktemp -d)"
    "$root/sdk/build-plugins.sh" --workspace "$dir" --out "$staging"
    local built=("$staging"/*.wasm)
    [[ ${#built[@]} -eq 1 && -f "${built[0]}" ]] || die "$dir: expected one .wasm, got ${built[*]}"
    mv "${built[0]}" "$out"
    rm -rf "$staging"
}

case "${1:-}" in
    --install)
        case "${2:-all}" in
            python) install_python ;;
            js) install_js ;;
            all) install_python; install_js ;;
            *) die "--install python|js" ;;
        esac
        exit 0 ;;
    --lang) lang_of "$(cd "$2" && pwd)"; exit 0 ;;
    "" | -h | --help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac

dir="$(cd "$1" && pwd)"
name="$(basename "$dir")"
out="${2:-$dir/target/wasm/$name.wasm}"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
lang="$(lang_of "$dir")"
# Build aside, then rename: a reader (the broker's plugin watcher, a test) never sees half a file.
tmp="$(dirname "$out")/.$(basename "$out").$$.tmp"
trap 'rm -f "$tmp"' EXIT
start=$SECONDS
"build_$lang" "$dir" "$tmp"
mv "$tmp" "$out"
say "$lang $name -> $out ($(stat -c %s "$out") bytes, $((SECONDS - start)) s)"
