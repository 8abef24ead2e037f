#!/usr/bin/env bash
# TLS against plaintext throughput, librdkafka's rdkafka_performance against a release broker.
#
#   tests/bench/tls_bench.sh                  RUNS=3 runs of 2,000,000 records of 100 bytes
#   RUNS=1 RECORDS=200000 tests/bench/tls_bench.sh      a quick smoke run
#   SLUICE_BIN=path/to/sluice tests/bench/tls_bench.sh  use that binary, build nothing
#
# One broker (fresh temp data dir) with a PLAINTEXT and an SSL listener; certificates are made
# with openssl at start. With an SSL listener, resources no ACL names are closed by default:
# the bench opens them (allow.everyone.if.no.acl.found=true), as it measures TLS, not ACLs.
# Each run produces (acks=1, linger.ms=5, one partition) then consumes from the beginning,
# first over PLAINTEXT, then over SSL, so both see the same machine load.
# The table shows medians over the runs and the TLS/plaintext ratio.
#
# rdkafka_performance is the one tests/bench/client_bench.sh builds (target/client-bench/);
# run that once first if it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-2000000}"
RECORD_BYTES=100
LINGER_MS=5
PERF="$(pwd)/target/client-bench/rdkafka_performance"
SLUICE="${SLUICE_BIN:-$(pwd)/target/release/sluice}"
START_DEADLINE_S=30

log() { printf '%s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ -x "$PERF" ] || die "$PERF missing: run tests/bench/client_bench.sh once (it builds it)"
if [ -z "${SLUICE_BIN:-}" ]; then cargo build --release -p sluice-cli >&2; fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/sluice-tls-bench.XXXXXX")"
BROKER_PID=""
cleanup() {
    if [ -n "$BROKER_PID" ]; then kill -TERM "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

make_certs() {
    local d="$WORK/tls"
    mkdir -p "$d"
    (
        cd "$d"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
            -out ca.pem -days 2 -subj "/CN=bench CA" -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
        printf 'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' >server.ext
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout server.key \
            -out server.csr -subj "/CN=localhost" 2>/dev/null
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.crt \
            -days 2 -extfile server.ext 2>/dev/null
        cat server.key server.crt >broker.pem
    )
}

PLAIN=""
SSL=""
start_broker() {
    mkdir "$WORK/data"
    env -u SLUICE_BIN "$SLUICE" serve --data-dir "$WORK/data" --admin-listen "" \
        --set listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0 \
        --set ssl.keystore.location="$WORK/tls/broker.pem" --set num.partitions=1 \
        --set allow.everyone.if.no.acl.found=true \
        >"$WORK/stdout" 2>"$WORK/broker.log" </dev/null &
    BROKER_PID=$!
    local deadline=$((SECONDS + START_DEADLINE_S))
    until grep -q '^sluice listening' "$WORK/stdout"; do
        kill -0 "$BROKER_PID" 2>/dev/null || die "broker exited: $(head -5 "$WORK/broker.log")"
        [ "$SECONDS" -le "$deadline" ] || die "no listening line in ${START_DEADLINE_S}s"
        sleep 0.05
    done
    PLAIN="$(sed -n 's/^sluice listener PLAINTEXT=//p' "$WORK/stdout")"
    SSL="$(sed -n 's/^sluice listener SSL=//p' "$WORK/stdout")"
}

# perf PROTOCOL ARGS... (PROTOCOL: plaintext or ssl)
perf() {
    local proto="$1"
    shift
    if [ "$proto" = ssl ]; then
        "$PERF" -b "$SSL" -q -X linger.ms="$LINGER_MS" -X security.protocol=ssl \
            -X ssl.ca.location="$WORK/tls/ca.pem" "$@"
    else
        "$PERF" -b "$PLAIN" -q -X linger.ms="$LINGER_MS" "$@"
    fi
}

# produce PROTOCOL TOPIC -> MB/s
produce() {
    local line
    line="$(perf "$1" -P -t "$2" -p 0 -s "$RECORD_BYTES" -c "$RECORDS" -a 1 | grep -m1 'messages produced')" ||
        die "no producer summary"
    grep -q " $RECORDS delivered .* 0 failed" <<<"$line" || die "not every record was delivered: $line"
    sed -E 's/.* ([0-9.]+) MB\/s.*/\1/' <<<"$line"
}

# consume PROTOCOL TOPIC -> MB/s
consume() {
    local line
    line="$(perf "$1" -C -t "$2" -p 0 -o beginning -c "$RECORDS" | grep 'messages (.*consumed' | tail -1)" ||
        die "no consumer summary"
    grep -q "^% $RECORDS messages" <<<"$line" || die "did not consume every record: $line"
    sed -E 's/.*\(([0-9.]+) MB\/s\).*/\1/' <<<"$line"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

main() {
    make_certs
    start_broker
    log "broker: PLAINTEXT $PLAIN, SSL $SSL; $RUNS runs of $RECORDS x $RECORD_BYTES B"
    local run proto
    declare -A results
    for run in $(seq 1 "$RUNS"); do
        for proto in plaintext ssl; do
            local produced consumed
            produced="$(produce "$proto" "t-$proto-$run")"
            consumed="$(consume "$proto" "t-$proto-$run")"
            results[$proto-produce]+="$produced "
            results[$proto-consume]+="$consumed "
            log "run $run $proto: produce $produced MB/s, consume $consumed MB/s"
        done
    done
    printf '| load | plaintext MB/s | TLS MB/s | TLS / plaintext |\n|---|---|---|---|\n'
    local load p t
    for load in produce consume; do
        p="$(tr ' ' '\n' <<<"${results[plaintext-$load]}" | grep . | median)"
        t="$(tr ' ' '\n' <<<"${results[ssl-$load]}" | grep . | median)"
        printf '| %s acks=1 | %s | %s | %s |\n' "$load" "$p" "$t" "$(awk -v p="$p" -v t="$t" 'BEGIN { printf "%.2f", t / p }')"
    done
}

main "$@"
