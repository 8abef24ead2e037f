#!/usr/bin/env bash
# Kafka's own perf tools (kafka-producer-perf-test, kafka-consumer-perf-test from kafka-tools
# 4.4.0, built by tests/run into tests/clients/java/target/lib) against sluice, one fresh
# broker per run. Each run: ProducerPerformance with acks=1, then acks=all (the baseline and
# the load, each to its own one-partition topic, 100-byte records, no throttle, the Java
# producer's defaults otherwise: idempotence on, linger.ms=5, batch.size=16384), then
# ConsumerPerformance reading the acks=1 topic. For each load it also reads the broker's
# utime+stime from /proc/PID/stat before and after: broker CPU microseconds per record.
# Prints each run's lines and the medians.
#
#   tests/bench/kafka_perf_tools.sh                       # SLUICE_BIN or target/release/sluice
#   RUNS=5 RECORDS=1000000 SLUICE_BIN=target/debug/sluice tests/bench/kafka_perf_tools.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SLUICE_BIN="${SLUICE_BIN:-target/release/sluice}"
RUNS="${RUNS:-3}"
RECORDS="${RECORDS:-500000}"
CP="tests/clients/java/target/java-check.jar:tests/clients/java/target/lib/*"
TOOLS=org.apache.kafka.tools
test -x "$SLUICE_BIN" || { echo "no broker at $SLUICE_BIN (set SLUICE_BIN)" >&2; exit 1; }
test -d tests/clients/java/target/lib || { echo "build the Java tools first: tests/run e2e, or mvn -q -B -f tests/clients/java/pom.xml package" >&2; exit 1; }

work="$(mktemp -d)"
broker_pid=
cleanup() { [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

start_broker() {
    rm -rf "$work/data" && mkdir -p "$work/data"
    # The broker refuses SLUICE_* variables that are not config keys, SLUICE_BIN among them.
    env -u SLUICE_BIN "$SLUICE_BIN" serve --data-dir "$work/data" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$work/stdout" 2>"$work/broker.log" &
    broker_pid=$!
    for _ in $(seq 300); do
        bootstrap="$(sed -n 's/^sluice listening kafka=\(127\.0\.0\.1:[0-9]*\).*/\1/p' "$work/stdout")"
        [ -n "$bootstrap" ] && return
        sleep 0.1
    done
    cat "$work/broker.log" >&2; echo "broker did not start" >&2; exit 1
}

stop_broker() { kill "$broker_pid"; wait "$broker_pid" || true; broker_pid=; }

produce() { # topic acks -> records/sec
    java -cp "$CP" $TOOLS.TopicCommand --bootstrap-server "$bootstrap" --create --topic "$1" --partitions 1 >/dev/null
    java -cp "$CP" $TOOLS.ProducerPerformance --topic "$1" --num-records "$RECORDS" --record-size 100 \
        --throughput -1 --command-property "bootstrap.servers=$bootstrap" "acks=$2" 2>/dev/null | tail -n 1 |
        tee -a "$work/lines" | sed -E 's/^[0-9]+ records sent, ([0-9.]+) records\/sec.*/\1/'
}

consume() { # topic -> fetch records/sec (nMsg.sec would include the group's join delay)
    java -cp "$CP" $TOOLS.ConsumerPerformance --bootstrap-server "$bootstrap" --topic "$1" \
        --num-records "$RECORDS" --timeout 120000 2>/dev/null | tail -n 1 | tee -a "$work/lines" |
        awk -F', *' '{print $10}'
}

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

broker_ticks() { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }

# Runs a load (a function printing records/sec) and prints "RATE CPU_US_PER_RECORD".
measured() {
    local before rate after
    before="$(broker_ticks)"
    rate="$("$@")"
    after="$(broker_ticks)"
    echo "$rate $(awk -v t="$((after - before))" -v hz="$(getconf CLK_TCK)" -v n="$RECORDS" 'BEGIN{printf "%.3f", t / hz * 1e6 / n}')"
}

for run in $(seq "$RUNS"); do
    start_broker
    read -r a1 a1cpu <<<"$(measured produce perf-acks1 1)"
    read -r aa aacpu <<<"$(measured produce perf-acksall all)"
    read -r c ccpu <<<"$(measured consume perf-acks1)"
    echo "run $run: acks=1 $a1 rec/s $a1cpu us/rec, acks=all $aa rec/s $aacpu us/rec, consume $c rec/s $ccpu us/rec (fetch time; broker CPU per record)" | tee -a "$work/runs"
    stop_broker
done
echo "--- tool lines"
cat "$work/lines"
echo "--- medians of $RUNS runs, $RECORDS records of 100 bytes (records/s, broker CPU us/record)"
col() { awk -v f="$1" '{print $f}' "$work/runs" | median; }
a1="$(col 4)"; aa="$(col 9)"; c="$(col 14)"
echo "producer acks=1:   $a1 records/s, $(col 6) us/record"
echo "producer acks=all: $aa records/s, $(col 11) us/record (acks=all / acks=1 = $(awk -v a="$aa" -v b="$a1" 'BEGIN{printf "%.2f", a/b}'))"
echo "consumer:          $c records/s, $(col 16) us/record (fetch time)"
