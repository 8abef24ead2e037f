#!/usr/bin/env bash
# Produce validation, A/B: the same real-client load against two broker binaries, in turn,
# for every codec. A is the baseline (a build without produce validation, e.g. main before
# it landed), B the build under test.
#
#   SLUICE_A=/path/to/old/sluice SLUICE_B=target/release/sluice tests/bench/validate_bench.sh
#   RUNS=3 RECORDS=2000000 CODECS="none gzip snappy lz4 zstd"   (defaults)
#   BENCH_NICE=-10                                                ahead of other work (root)
#
# Each run starts a fresh broker per binary (A then B, so drift hits both alike) and, for each
# codec, produces RECORDS records of 100 bytes with rdkafka_performance (acks=1, linger.ms=5,
# one partition, `-z CODEC`, its fixed, compressible payload), reading the broker's utime+stime
# before and after: msgs/s and broker CPU per record. The table shows medians over the runs
# and the ratio B/A of each median (throughput: > 1 is faster; CPU: > 1 costs more).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=client_bench.sh
source tests/bench/client_bench.sh

RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-2000000}"
CODECS="${CODECS:-none gzip snappy lz4 zstd}"
A="${SLUICE_A:?set SLUICE_A to the baseline broker binary}"
B="${SLUICE_B:?set SLUICE_B to the broker binary under test}"
# The broker refuses unknown SLUICE_* variables: keep ours out of its environment.
unset SLUICE_A SLUICE_B

# produce_codec TOPIC CODEC -> "msgs_per_s cpu_us_per_record sys_us_per_record"
produce_codec() {
    local before after out line
    before="$(broker_cpu_ticks)"
    out="$(perf -P -t "$1" -p 0 -s "$RECORD_BYTES" -c "$RECORDS" -a 1 -z "$2")"
    after="$(broker_cpu_ticks)"
    line="$(grep -m1 'messages produced' <<<"$out")" || die "no producer summary: $out"
    grep -q " $RECORDS delivered .* 0 failed" <<<"$line" || die "not every record was delivered: $line"
    printf '%s %s\n' "$(sed -E 's/.* ([0-9]+) msgs\/s.*/\1/' <<<"$line")" \
        "$(cpu_per_record "$before" "$after" "$RECORDS")"
}

run_binary() {
    local label=$1 binary=$2 results=$3 codec r
    SLUICE="$binary" start_broker
    for codec in $CODECS; do
        r="$(produce_codec "bench-$codec" "$codec")"
        echo "$label $codec $r" >>"$results"
        log "$label $codec: $r"
    done
    stop_broker
}

table() {
    local results=$1 codec a_rate b_rate a_cpu b_cpu
    printf '\n%s runs, %s records of %s bytes per codec, acks=1, 1 partition, linger.ms=%s (medians)\n\n' \
        "$RUNS" "$RECORDS" "$RECORD_BYTES" "$LINGER_MS"
    printf '| codec | A msgs/s | B msgs/s | B/A throughput | A CPU us/rec | B CPU us/rec | B/A CPU |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|\n'
    for codec in $CODECS; do
        a_rate="$(awk -v c="$codec" '$1 == "A" && $2 == c { print $3 }' "$results" | median)"
        b_rate="$(awk -v c="$codec" '$1 == "B" && $2 == c { print $3 }' "$results" | median)"
        a_cpu="$(awk -v c="$codec" '$1 == "A" && $2 == c { print $4 }' "$results" | median)"
        b_cpu="$(awk -v c="$codec" '$1 == "B" && $2 == c { print $4 }' "$results" | median)"
        printf '| %s | %s | %s | %.2f | %s | %s | %.2f |\n' "$codec" "$a_rate" "$b_rate" \
            "$(awk -v a="$a_rate" -v b="$b_rate" 'BEGIN { print b / a }')" "$a_cpu" "$b_cpu" \
            "$(awk -v a="$a_cpu" -v b="$b_cpu" 'BEGIN { print b / a }')"
    done
    printf '\nraw results: %s\n' "$results"
}

validate_main() {
    install_packages
    build_perf_tool
    local results run
    mkdir -p "$WORK"
    results="$WORK/validate-$(date -u +%Y%m%dT%H%M%SZ).txt"
    : >"$results"
    for run in $(seq 1 "$RUNS"); do
        echo "loadavg_before_run_$run $(cut -d' ' -f1-3 /proc/loadavg)" >>"$results"
        run_binary A "$A" "$results"
        run_binary B "$B" "$results"
    done
    table "$results"
}

validate_main "$@"
