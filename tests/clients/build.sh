#!/usr/bin/env bash
# Builds the external client programs of the e2e suites, each only when it is missing or
# older than its sources, and prints (last line per client) what the suite runs:
#
#   tests/clients/build.sh [franz|kafkago|kafkajs]...   (no argument: all three)
#
#   franz, kafkago  `go build` of tests/clients/<name> (a Go module; go.sum pinned, modules
#                   fetched from the Go module proxy on first use) -> target/clients/<name>-check
#   kafkajs         `npm ci --ignore-scripts` in tests/clients/kafkajs (package-lock.json
#                   pinned; no package there needs an install script) -> that directory
#
# tests/run calls it once per run; the pytest fixtures call it again (a quick no-op then, or
# the build when pytest runs by hand). A lock serialises pytest-xdist workers.
set -euo pipefail
cd "$(dirname "$0")/../.."
CLIENTS=tests/clients
OUT=target/clients
mkdir -p "$OUT"

find_go() {
    local go
    for go in "$(command -v go || true)" /usr/local/go/bin/go /usr/lib/go/bin/go; do
        if [ -n "$go" ] && [ -x "$go" ]; then
            echo "$go"
            return
        fi
    done
    echo "no Go toolchain: tests/run installs one (golang-go) when there is none" >&2
    exit 1
}

# Exit 0 when `go version` is at least the module's `go` line (major.minor).
go_suffices() {
    local have want
    have="$("$1" env GOVERSION | sed 's/^go//')"
    want="$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$2/go.mod")"
    [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n 1)" = "$want" ] || {
        echo "$2 needs Go $want; $1 is $have" >&2
        return 1
    }
}

# Newer than every source of the module: nothing to do.
up_to_date() {
    local target="$1" dir="$2"
    [ -x "$target" ] && [ -z "$(find "$dir" -newer "$target" \( -name '*.go' -o -name go.mod -o -name go.sum \) -print -quit)" ]
}

build_go() {
    local name="$1" dir="$CLIENTS/$1" target="$OUT/$1-check" go
    if ! up_to_date "$target" "$dir"; then
        go="$(find_go)"
        go_suffices "$go" "$dir"
        # -mod=readonly: go.sum is the pin, a missing or changed sum fails instead of
        # updating it; GOTOOLCHAIN=local: never fetch another toolchain; no cgo needed.
        (cd "$dir" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local CGO_ENABLED=0 \
            "$go" build -trimpath -o "../../../$target.partial" .) >&2
        mv "$target.partial" "$target"
    fi
    echo "$(pwd)/$target"
}

install_kafkajs() {
    local dir="$CLIENTS/kafkajs"
    # npm ci writes node_modules/.package-lock.json last: newer than the lock means done.
    if [ ! "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
        command -v npm >/dev/null || { echo "no npm: tests/run installs nodejs and npm" >&2; exit 1; }
        (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
    fi
    echo "$(pwd)/$dir"
}

exec 9>"$OUT/.lock"
flock 9
[ $# -gt 0 ] || set -- franz kafkago kafkajs
for client in "$@"; do
    case "$client" in
        franz | kafkago) build_go "$client" ;;
        kafkajs) install_kafkajs ;;
        *)
            echo "unknown client $client (franz, kafkago, kafkajs)" >&2
            exit 2
            ;;
    esac
done
