#!/usr/bin/env bash
# Kafka's own perf tools (kafka-producer-perf-test, kafka-consumer-perf-test from kafka-tools
# 4.4.0, built by tests/run into tests/clients/java/target/lib) against sluice, one fresh
# broker per run. Each run: ProducerPerformance with acks=1, then acks=all (the baseline and
# the load, each to its own one-partition topic, 100-byte records, no throttle, the Java
# producer's defaults otherwise: idempotence on, linger.ms=5, batch.size=16384), then
# ConsumerPerformance reading the acks=1 topic. Prints each run's lines and the medians.
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

for run in $(seq "$RUNS"); do
    start_broker
    echo "run $run: acks=1 $(produce perf-acks1 1) rec/s, acks=all $(produce perf-acksall all) rec/s, consume $(consume perf-acks1) rec/s (fetch time)" | tee -a "$work/runs"
    stop_broker
done
echo "--- tool lines"
cat "$work/lines"
echo "--- medians of $RUNS runs, $RECORDS records of 100 bytes"
a1="$(awk '{print $4}' "$work/runs" | median)"
aa="$(awk '{print $7}' "$work/runs" | median)"
c="$(awk '{print $10}' "$work/runs" | median)"
echo "producer acks=1:   $a1 records/s"
echo "producer acks=all: $aa records/s (acks=all / acks=1 = $(awk -v a="$aa" -v b="$a1" 'BEGIN{printf "%.2f", a/b}'))"
echo "consumer:          $c records/s (fetch time)"
