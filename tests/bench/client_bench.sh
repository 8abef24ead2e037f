#!/usr/bin/env bash
# Real-client load against a release `sluice` broker, with librdkafka's own rdkafka_performance.
#
#   tests/bench/client_bench.sh              RUNS=3 runs, 5,000,000 records of 100 bytes per load
#   RUNS=1 RECORDS=500000 tests/bench/client_bench.sh     a quick smoke run
#   SLUICE_BIN=path/to/sluice tests/bench/client_bench.sh  use that binary, build nothing
#   BENCH_NICE=-10 tests/bench/client_bench.sh             ahead of other work (needs root)
#
# Each run starts a fresh broker (release build, ephemeral port, temp data dir deleted after)
# and runs, on one partition with 100-byte records and linger.ms=5:
#   produce acks=1, produce acks=all (the broker fsyncs before answering acks=all by default),
#   consume the acks=1 topic from the beginning, and rate-limited acks=all producers
#   (LATENCY_RUNS) that record every delivery latency for p50/p99.
# For every load it reads the broker's utime+stime from /proc/PID/stat before and after, and
# reports broker CPU microseconds per record. The table shows medians over the runs.
#
# rdkafka_performance.c is not in Debian's librdkafka-dev (it needs librdkafka's internal
# headers), so this script takes the librdkafka tree vendored in the rdkafka-sys crate
# (cargo fetch, pinned), compiles examples/rdkafka_performance.c against those headers, and
# links Debian's librdkafka (the same 2.0.2 kcat uses), with one small patch (random keys,
# rdkafka_performance-random-keys.patch). Everything it builds goes to
# target/client-bench/.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-5000000}"
RECORD_BYTES=100
LINGER_MS=5
# Latency runs: "rate_msgs_per_s linger_ms records" each, acks=all, one record per message.
LATENCY_RUNS=("100 0 1000" "1000 0 5000" "1000 5 10000")
LATENCY_WARMUP=50
RDKAFKA_SYS_VERSION="=4.10.0"
WORK="$(pwd)/target/client-bench"
PERF="$WORK/rdkafka_performance"
# Adds `-K <cnt>` (a random key out of <cnt> per record) for tests/bench/plugin_bench.py.
KEYS_PATCH="$(pwd)/tests/bench/rdkafka_performance-random-keys.patch"
# SLUICE_BIN: use this broker binary instead of building target/release/sluice.
SLUICE="${SLUICE_BIN:-$(pwd)/target/release/sluice}"
START_DEADLINE_S=30
# BENCH_NICE=-10 runs the broker and the clients ahead of other work on a shared machine.
NICE=(nice -n "${BENCH_NICE:-0}")
CLK_TCK="$(getconf CLK_TCK)"

log() { printf '%s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

install_packages() {
    local missing=() pkg
    for pkg in librdkafka-dev gcc libc6-dev patch; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return
    log "apt-get install ${missing[*]}"
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq -o DPkg::Lock::Timeout=600
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=600 "${missing[@]}" </dev/null
}

# Prints the directory of the librdkafka tree inside the rdkafka-sys crate source.
vendored_librdkafka() {
    local fetch="$WORK/fetch"
    mkdir -p "$fetch/src"
    : >"$fetch/src/lib.rs"
    cat >"$fetch/Cargo.toml" <<EOF
[package]
name = "client-bench-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
rdkafka-sys = { version = "$RDKAFKA_SYS_VERSION", default-features = false }

[workspace]
EOF
    cargo fetch --quiet --manifest-path "$fetch/Cargo.toml" >&2
    local manifest
    manifest="$(cargo metadata --format-version 1 --manifest-path "$fetch/Cargo.toml" |
        grep -o '"manifest_path":"[^"]*/rdkafka-sys-[^"]*/Cargo.toml"' | head -1 | cut -d'"' -f4)"
    [ -n "$manifest" ] || die "rdkafka-sys source not found after cargo fetch"
    printf '%s\n' "$(dirname "$manifest")/librdkafka"
}

# The few config.h switches the internal headers need (normally written by ./configure).
write_config_h() {
    cat >"$1" <<'EOF'
#define ARCH "x86_64"
#define CPU "generic"
#define WITHOUT_OPTIMIZATION 0
#define ENABLE_DEVEL 0
#define HAVE_ATOMICS_32 1
#define HAVE_ATOMICS_32_ATOMIC 1
#define ATOMIC_OP32(OP1, OP2, PTR, VAL) __atomic_##OP1##_##OP2(PTR, VAL, __ATOMIC_SEQ_CST)
#define HAVE_ATOMICS_64 1
#define HAVE_ATOMICS_64_ATOMIC 1
#define ATOMIC_OP64(OP1, OP2, PTR, VAL) __atomic_##OP1##_##OP2(PTR, VAL, __ATOMIC_SEQ_CST)
#define ATOMIC_OP(OP1, OP2, PTR, VAL) __atomic_##OP1##_##OP2(PTR, VAL, __ATOMIC_SEQ_CST)
#define HAVE_STRNDUP 1
#define HAVE_RAND_R 1
#define HAVE_PTHREAD_SETNAME_GNU 1
#define HAVE_REGEX 1
EOF
}

build_perf_tool() {
    if [ -x "$PERF" ] && [ "$PERF" -nt "$0" ] && [ "$PERF" -nt "$KEYS_PATCH" ]; then return; fi
    local src tree="$WORK/librdkafka"
    src="$(vendored_librdkafka)"
    log "building rdkafka_performance from $src against Debian's librdkafka"
    rm -rf "$tree"
    mkdir -p "$tree/examples"
    cp -r "$src/src" "$tree/src"
    cp "$src/examples/rdkafka_performance.c" "$tree/examples/"
    patch --quiet -d "$tree" -p1 <"$KEYS_PATCH"
    write_config_h "$tree/config.h"
    # Debian's public header first, so the tool is compiled against the library it links.
    gcc -O2 -w -o "$PERF" -I/usr/include/librdkafka -I"$tree/src" \
        "$tree/examples/rdkafka_performance.c" -lrdkafka -lm -lpthread
}

BROKER_PID=""
BROKER_DIR=""
BOOTSTRAP=""

start_broker() {
    BROKER_DIR="$(mktemp -d "${TMPDIR:-/tmp}/sluice-bench.XXXXXX")"
    mkdir "$BROKER_DIR/data"
    # The broker refuses unknown SLUICE_* variables, and SLUICE_BIN is ours, not its.
    env -u SLUICE_BIN "${NICE[@]}" "$SLUICE" serve --data-dir "$BROKER_DIR/data" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
        --set auto.create.topics.enable=true --set num.partitions=1 \
        >"$BROKER_DIR/stdout" 2>"$BROKER_DIR/broker.log" </dev/null &
    BROKER_PID=$!
    local deadline=$((SECONDS + START_DEADLINE_S)) line=""
    while [ -z "$line" ]; do
        line="$(grep -m1 '^sluice listening kafka=' "$BROKER_DIR/stdout" || true)"
        kill -0 "$BROKER_PID" 2>/dev/null || die "broker exited: $(grep -v '^ ' "$BROKER_DIR/broker.log" | head -5)"
        [ "$SECONDS" -le "$deadline" ] || die "broker did not print its listening line in ${START_DEADLINE_S}s"
        [ -n "$line" ] || sleep 0.05
    done
    BOOTSTRAP="${line#sluice listening kafka=}"
    BOOTSTRAP="${BOOTSTRAP%% *}"
}

stop_broker() {
    [ -n "$BROKER_PID" ] || return 0
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    local rc=0
    wait "$BROKER_PID" || rc=$?
    [ "$rc" -eq 0 ] || log "warning: broker exited $rc after SIGTERM"
    rm -rf "$BROKER_DIR"
    BROKER_PID=""
}
trap stop_broker EXIT

# "utime stime" of the broker, in clock ticks.
broker_cpu_ticks() {
    awk '{ sub(/^.*\) /, ""); print $12, $13 }' "/proc/$BROKER_PID/stat"
}

# cpu_per_record "UTIME STIME" "UTIME STIME" RECORDS -> "total_us_per_record system_us_per_record"
cpu_per_record() {
    awk -v a="$1" -v b="$2" -v n="$3" -v hz="$CLK_TCK" 'BEGIN {
        split(a, x, " "); split(b, y, " ")
        total = (y[1] + y[2]) - (x[1] + x[2]); sys = y[2] - x[2]
        printf "%.3f %.3f", total / hz * 1e6 / n, sys / hz * 1e6 / n }'
}

perf() {
    "${NICE[@]}" "$PERF" -b "$BOOTSTRAP" -q -X linger.ms="$LINGER_MS" "$@"
}

# produce TOPIC ACKS -> "msgs_per_s mb_per_s cpu_us_per_record sys_us_per_record"
produce_load() {
    local before after out
    before="$(broker_cpu_ticks)"
    out="$(perf -P -t "$1" -p 0 -s "$RECORD_BYTES" -c "$RECORDS" -a "$2")"
    after="$(broker_cpu_ticks)"
    local line
    line="$(grep -m1 'messages produced' <<<"$out")" || die "no producer summary: $out"
    grep -q " $RECORDS delivered .* 0 failed" <<<"$line" || die "not every record was delivered: $line"
    printf '%s %s %s\n' "$(sed -E 's/.* ([0-9]+) msgs\/s.*/\1/' <<<"$line")" \
        "$(sed -E 's/.* ([0-9.]+) MB\/s.*/\1/' <<<"$line")" "$(cpu_per_record "$before" "$after" "$RECORDS")"
}

consume_load() {
    local before after out line
    before="$(broker_cpu_ticks)"
    out="$(perf -C -t "$1" -p 0 -o beginning -c "$RECORDS")"
    after="$(broker_cpu_ticks)"
    line="$(grep 'messages (.*consumed' <<<"$out" | tail -1)" || die "no consumer summary: $out"
    grep -q "^% $RECORDS messages" <<<"$line" || die "did not consume every record: $line"
    printf '%s %s %s\n' "$(sed -E 's/.* ([0-9]+) msgs\/s.*/\1/' <<<"$line")" \
        "$(sed -E 's/.*\(([0-9.]+) MB\/s\).*/\1/' <<<"$line")" "$(cpu_per_record "$before" "$after" "$RECORDS")"
}

# latency TOPIC RATE LINGER_MS RECORDS -> "p50_ms p99_ms"
latency_load() {
    local file="$BROKER_DIR/latency-$1.txt"
    "${NICE[@]}" "$PERF" -b "$BOOTSTRAP" -q -X linger.ms="$3" -P -t "$1" -p 0 -s "$RECORD_BYTES" -a -1 \
        -c "$4" -r "$2" -l -A "$file" >/dev/null
    [ "$(wc -l <"$file")" -eq "$4" ] || die "latency file has $(wc -l <"$file") of $4 samples"
    # The first LATENCY_WARMUP deliveries include connection setup and metadata: not counted.
    tail -n +"$((LATENCY_WARMUP + 1))" "$file" | sort -n | awk '{ v[NR] = $1 } END {
        printf "%.2f %.2f\n", v[int(NR * 0.50)] / 1000, v[int(NR * 0.99)] / 1000 }'
}

# Appends one "load value..." line per load to RESULTS.
run_once() {
    local run=$1 results=$2 r
    start_broker
    log "run $run: broker pid $BROKER_PID at $BOOTSTRAP"
    # Other work on the machine skews the numbers: keep the load average with the results.
    echo "loadavg_before_run_$run $(cut -d' ' -f1-3 /proc/loadavg)" >>"$results"
    r="$(produce_load bench-acks1 1)"
    echo "produce_acks1 $r" >>"$results"
    r="$(produce_load bench-acksall -1)"
    echo "produce_acksall $r" >>"$results"
    r="$(consume_load bench-acks1)"
    echo "consume $r" >>"$results"
    local spec rate linger count
    for spec in "${LATENCY_RUNS[@]}"; do
        read -r rate linger count <<<"$spec"
        r="$(latency_load "bench-latency-$rate-$linger" "$rate" "$linger" "$count")"
        echo "latency_${rate}_${linger}_${count} $r" >>"$results"
    done
    stop_broker
    tail -"$((3 + ${#LATENCY_RUNS[@]}))" "$results" >&2
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

print_table() {
    local results=$1 load
    printf '\n%s runs, %s records of %s bytes, 1 partition, linger.ms=%s (medians)\n\n' \
        "$RUNS" "$RECORDS" "$RECORD_BYTES" "$LINGER_MS"
    printf '| load | msgs/s | MB/s | broker CPU us/record | of which system |\n|---|---:|---:|---:|---:|\n'
    for load in produce_acks1 produce_acksall consume; do
        printf '| %s | %s | %s | %s | %s |\n' "$load" \
            "$(awk -v l="$load" '$1 == l { print $2 }' "$results" | median)" \
            "$(awk -v l="$load" '$1 == l { print $3 }' "$results" | median)" \
            "$(awk -v l="$load" '$1 == l { print $4 }' "$results" | median)" \
            "$(awk -v l="$load" '$1 == l { print $5 }' "$results" | median)"
    done
    printf '\nacks=all produce latency, first %s deliveries not counted\n\n' "$LATENCY_WARMUP"
    printf '| msgs/s | linger.ms | records | p50 ms | p99 ms |\n|---:|---:|---:|---:|---:|\n'
    local spec rate linger count key
    for spec in "${LATENCY_RUNS[@]}"; do
        read -r rate linger count <<<"$spec"
        key="latency_${rate}_${linger}_${count}"
        printf '| %s | %s | %s | %s | %s |\n' "$rate" "$linger" "$count" \
            "$(awk -v l="$key" '$1 == l { print $2 }' "$results" | median)" \
            "$(awk -v l="$key" '$1 == l { print $3 }' "$results" | median)"
    done
    printf '\nraw results: %s\n' "$results"
}

main() {
    install_packages
    build_perf_tool
    if [ -z "${SLUICE_BIN:-}" ]; then
        log "building the release broker"
        cargo build --release --quiet -p sluice-cli
    fi
    local results run
    results="$WORK/results-$(date -u +%Y%m%dT%H%M%SZ).txt"
    : >"$results"
    for run in $(seq 1 "$RUNS"); do
        run_once "$run" "$results"
    done
    print_table "$results"
}

# Run as a script; sourced (tests/bench/validate_bench.sh), only the functions are defined.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
