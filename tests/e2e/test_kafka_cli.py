"""Apache Kafka's own CLI tools (kafka-tools 4.4.0, Maven) against a real broker.

Covers: kafka-topics (--create with --partitions and --config, --list, --describe, --alter
--partitions, --delete); kafka-console-producer with keys and kafka-console-consumer
(--from-beginning, --max-messages, keys printed, a group); kafka-consumer-groups (--list,
--describe, --reset-offsets --to-earliest --execute, --delete-offsets); kafka-configs
(--describe --all for a topic and for the broker, every entry with its source; --alter
--add-config retention.ms and cleanup.policy=compact); kafka-producer-perf-test (acks=all)
and kafka-consumer-perf-test over a bounded record count.

How: each tool is its main class run as `java -cp tests/clients/java/target/lib/* ...`
(what bin/kafka-*.sh does), on the classpath tests/run builds (java_support.py). Outputs are
the tools' own text, parsed here. About a second of JVM start per invocation, so the tools
are grouped into four tests.
"""

from __future__ import annotations

import re

import pytest
from java_support import java_classpath, run_java

TOOLS = "org.apache.kafka.tools"
TOPICS = f"{TOOLS}.TopicCommand"
CONFIGS = f"{TOOLS}.ConfigCommand"
CONSOLE_PRODUCER = f"{TOOLS}.ConsoleProducer"
CONSOLE_CONSUMER = f"{TOOLS}.consumer.ConsoleConsumer"
CONSUMER_GROUPS = f"{TOOLS}.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = f"{TOOLS}.ProducerPerformance"
CONSUMER_PERF = f"{TOOLS}.ConsumerPerformance"
PERF_RECORDS = 20_000


@pytest.fixture(scope="module")
def classpath() -> str:
    return java_classpath()


def tool(classpath: str, main_class: str, bootstrap: str, *args: str, stdin: str | None = None) -> str:
    return run_java(classpath, main_class, "--bootstrap-server", bootstrap, *args, stdin=stdin).stdout


def partition_lines(describe: str) -> list[str]:
    return [line.strip() for line in describe.splitlines() if line.strip().startswith("Topic:") and "Partition:" in line]


def test_kafka_topics(broker, topic_name, classpath):
    b = broker.bootstrap
    out = tool(classpath, TOPICS, b, "--create", "--topic", topic_name, "--partitions", "3", "--config", "retention.ms=3600000")
    assert f"Created topic {topic_name}." in out
    assert topic_name in tool(classpath, TOPICS, b, "--list").split()

    described = tool(classpath, TOPICS, b, "--describe", "--topic", topic_name)
    # The topic id (KIP-516) as kafka-topics prints it: base64 of the 16 bytes, URL-safe.
    summary = rf"Topic: {re.escape(topic_name)}\tTopicId: [A-Za-z0-9_-]{{22}}\tPartitionCount: 3\tReplicationFactor: 1"
    assert re.search(summary + r"\tConfigs: retention.ms=3600000", described), described
    lines = partition_lines(described)
    assert [re.search(r"Partition: (\d+)", line).group(1) for line in lines] == ["0", "1", "2"]
    assert all("Leader: 0\tReplicas: 0\tIsr: 0" in line for line in lines), lines

    tool(classpath, TOPICS, b, "--alter", "--topic", topic_name, "--partitions", "5")
    assert len(partition_lines(tool(classpath, TOPICS, b, "--describe", "--topic", topic_name))) == 5

    tool(classpath, TOPICS, b, "--delete", "--topic", topic_name)
    assert topic_name not in tool(classpath, TOPICS, b, "--list").split()


def group_rows(describe: str, group: str) -> dict[int, tuple[str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET) from kafka-consumer-groups --describe."""
    rows = {}
    for line in describe.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[0] == group and cols[2].isdigit():
            rows[int(cols[2])] = (cols[3], cols[4])
    return rows


def test_console_producer_consumer_and_consumer_groups(broker, topic_name, classpath):
    b = broker.bootstrap
    group = f"{topic_name}-group"
    tool(classpath, TOPICS, b, "--create", "--topic", topic_name, "--partitions", "2")
    sent = [(f"key-{i}", f"value {i}") for i in range(10)]
    tool(
        classpath, CONSOLE_PRODUCER, b, "--topic", topic_name,
        "--reader-property", "parse.key=true", "--reader-property", "key.separator=|",
        stdin="".join(f"{k}|{v}\n" for k, v in sent),
    )
    consumed = tool(
        classpath, CONSOLE_CONSUMER, b, "--topic", topic_name, "--from-beginning", "--max-messages", str(len(sent)),
        "--group", group, "--formatter-property", "print.key=true", "--formatter-property", "key.separator=|",
    )
    assert sorted(tuple(line.split("|", 1)) for line in consumed.splitlines()) == sorted(sent)

    assert group in tool(classpath, CONSUMER_GROUPS, b, "--list").split()
    rows = group_rows(tool(classpath, CONSUMER_GROUPS, b, "--describe", "--group", group), group)
    assert sorted(rows) == [0, 1]
    assert all(current == end for current, end in rows.values()), rows
    assert sum(int(end) for _, end in rows.values()) == len(sent)

    reset = tool(classpath, CONSUMER_GROUPS, b, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic_name)
    # GROUP TOPIC PARTITION NEW-OFFSET
    assert sorted(re.findall(rf"^{re.escape(group)}\s+{re.escape(topic_name)}\s+(\d+)\s+0$", reset, re.M)) == ["0", "1"], reset
    rows = group_rows(tool(classpath, CONSUMER_GROUPS, b, "--describe", "--group", group), group)
    assert {current for current, _ in rows.values()} == {"0"}, rows

    deleted = tool(classpath, CONSUMER_GROUPS, b, "--delete-offsets", "--group", group, "--topic", topic_name)
    assert f"Request succeeded for deleting offsets from group {group}." in deleted
    assert re.findall(rf"{re.escape(topic_name)}\s+(\d+)\s+Successful", deleted) == ["0", "1"]


CONFIG_LINE = re.compile(r"^  ([a-z0-9.]+)=(.*) sensitive=(true|false) synonyms=\{(.*)\}$")


def config_entries(out: str) -> dict[str, tuple[str, str]]:
    """name -> (value, synonyms) of each `  name=value sensitive=... synonyms={...}` line."""
    entries = {}
    for line in out.splitlines():
        match = CONFIG_LINE.match(line)
        if match:
            entries[match.group(1)] = (match.group(2), match.group(4))
    return entries


def test_kafka_configs(broker, topic_name, classpath):
    b = broker.bootstrap
    tool(classpath, TOPICS, b, "--create", "--topic", topic_name, "--config", "retention.ms=3600000")
    topic = ("--entity-type", "topics", "--entity-name", topic_name)

    described = tool(classpath, CONFIGS, b, "--describe", "--all", *topic)
    entries = config_entries(described)
    assert len(entries) >= 10 and len(entries) == len(described.splitlines()) - 1, described
    assert entries["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG:retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=604800000")
    assert entries["cleanup.policy"] == ("delete", "DEFAULT_CONFIG:log.cleanup.policy=delete")
    # Every Kafka entry names its source first; the topic keys with no broker-level default
    # (Sluice's own: sluice.partitioner...) have no synonym.
    own = {name for name in entries if name.startswith("sluice.")}
    kafka_keys = {name: syn for name, (_, syn) in entries.items() if name not in own}
    assert all(re.match(r"(DYNAMIC_TOPIC_CONFIG|DEFAULT_CONFIG):", syn) for syn in kafka_keys.values()), kafka_keys
    assert {entries[name][1] for name in own} <= {""}
    assert entries["min.insync.replicas"][0] == "1"

    out = tool(classpath, CONFIGS, b, "--alter", *topic, "--add-config", "retention.ms=7200000,cleanup.policy=compact")
    assert f"Completed updating config for topic {topic_name}." in out
    dynamic = config_entries(tool(classpath, CONFIGS, b, "--describe", *topic))
    assert dynamic == {
        "cleanup.policy": ("compact", "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete"),
        "retention.ms": ("7200000", "DYNAMIC_TOPIC_CONFIG:retention.ms=7200000, DEFAULT_CONFIG:log.retention.ms=604800000"),
    }

    broker_out = tool(classpath, CONFIGS, b, "--describe", "--all", "--entity-type", "brokers", "--entity-name", "0")
    assert broker_out.startswith("All configs for broker 0 are:")
    broker_entries = config_entries(broker_out)
    assert len(broker_entries) == len(broker_out.splitlines()) - 1, broker_out
    assert broker_entries["log.retention.ms"] == ("604800000", "DEFAULT_CONFIG:log.retention.ms=604800000")
    assert broker_entries["listeners"][1].startswith("STATIC_BROKER_CONFIG:listeners=PLAINTEXT://127.0.0.1:")
    assert all(re.match(r"(DEFAULT_CONFIG|STATIC_BROKER_CONFIG|DYNAMIC_\w+):", syn) for _, syn in broker_entries.values())


def test_perf_tools_report_every_record(broker, topic_name, classpath):
    b = broker.bootstrap
    tool(classpath, TOPICS, b, "--create", "--topic", topic_name, "--partitions", "2")
    produced = run_java(
        classpath, PRODUCER_PERF, "--topic", topic_name, "--num-records", str(PERF_RECORDS), "--record-size", "100",
        "--throughput", "-1", "--command-property", f"bootstrap.servers={b}", "acks=all",
    ).stdout
    assert re.search(rf"^{PERF_RECORDS} records sent, [\d.]+ records/sec", produced, re.M), produced

    consumed = tool(classpath, CONSUMER_PERF, b, "--topic", topic_name, "--num-records", str(PERF_RECORDS), "--timeout", "60000")
    header, row = consumed.strip().splitlines()[-2:]
    fields = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in row.split(",")), strict=True))
    assert int(fields["data.consumed.in.nMsg"]) == PERF_RECORDS, consumed
    assert float(fields["data.consumed.in.MB"]) == pytest.approx(PERF_RECORDS * 100 / 1024 / 1024, abs=0.001)
