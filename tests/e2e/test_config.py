"""Broker configuration as an operator meets it: `--set key=value` flags with Kafka's key
names, SLUICE_* environment overrides, and refusal to start on bad input.

Covers: flags and env both change behaviour seen over the wire (auto-create, partition count,
message.max.bytes) and what DescribeConfigs reports; an unknown key, a malformed value and an
unknown SLUICE_* variable each make `sluice serve` exit non-zero before it listens, with a
message naming the culprit; so does a second broker on a data dir in use; the listening line
is the only stdout line. `sluice serve --print-config` prints TOML (parsed here) with each
key's source (default, file, env, flag), hides `admin.token`, and its output is a config file
that gives the same configuration back.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib

from confluent_kafka.admin import ConfigResource, ResourceType

import kafka_wire as kw
from clients import admin, admin_op, create_topic
from conftest import START_DEADLINE_S, sluice_bin
from kafka_wire import KafkaConnection


def describe_broker(bootstrap: str) -> dict:
    (broker_id,) = admin(bootstrap).list_topics(timeout=30).brokers.keys()
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    return {name: entry.value for name, entry in admin_op(bootstrap, "describe_configs", [resource])[resource].items()}


def test_env_override_disables_auto_create(broker_factory, topic_name):
    broker = broker_factory(env={"SLUICE_AUTO_CREATE_TOPICS_ENABLE": "false"})
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.metadata_topic_errors([topic_name]) == {topic_name: kw.UNKNOWN_TOPIC_OR_PARTITION}
    assert describe_broker(broker.bootstrap)["auto.create.topics.enable"] == "false"


def test_auto_create_uses_num_partitions(broker_factory, topic_name):
    broker = broker_factory({"num.partitions": "4"})
    with KafkaConnection(broker.bootstrap) as conn:
        # Metadata v1 for an unknown topic auto-creates it when auto.create.topics.enable=true.
        assert conn.metadata_topic_errors([topic_name]).get(topic_name) in (kw.NONE, 5)  # 5: LEADER_NOT_AVAILABLE
    md = admin(broker.bootstrap).list_topics(timeout=30)
    assert len(md.topics[topic_name].partitions) == 4


def test_flag_message_max_bytes_applies_and_is_described(broker_factory, topic_name):
    broker = broker_factory({"message.max.bytes": "10000"})
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.produce(topic_name, 0, kw.record_batch([b"x" * 9000])).error_code == kw.NONE
        assert conn.produce(topic_name, 0, kw.record_batch([b"x" * 11000])).error_code == kw.MESSAGE_TOO_LARGE
    assert describe_broker(broker.bootstrap)["message.max.bytes"] == "10000"


def run_expecting_refusal(tmp_path, args: list[str], extra_env: dict[str, str] | None = None) -> str:
    """Runs `sluice serve` expecting it to exit non-zero without listening; returns stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update(extra_env or {})
    (tmp_path / "data").mkdir(exist_ok=True)
    cmd = [
        sluice_bin(),
        "serve",
        "--data-dir",
        str(tmp_path / "data"),
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        *args,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=START_DEADLINE_S, env=env, stdin=subprocess.DEVNULL
    )
    assert proc.returncode != 0, f"broker accepted {args}: {proc.stdout}"
    assert "listening" not in proc.stdout, proc.stdout
    return proc.stderr


def test_unknown_key_is_refused(tmp_path):
    stderr = run_expecting_refusal(tmp_path, ["--set", "no.such.key=1"])
    assert "no.such.key" in stderr


def test_malformed_value_is_refused(tmp_path):
    stderr = run_expecting_refusal(tmp_path, ["--set", "message.max.bytes=lots"])
    assert "message.max.bytes" in stderr


def test_unknown_env_variable_is_refused(tmp_path):
    stderr = run_expecting_refusal(tmp_path, [], extra_env={"SLUICE_NO_SUCH_KEY": "1"})
    assert "SLUICE_NO_SUCH_KEY" in stderr


def test_second_broker_on_the_same_data_dir_is_refused(broker):
    proc = subprocess.run(
        [*broker.command()],
        capture_output=True,
        text=True,
        timeout=START_DEADLINE_S,
        stdin=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")},
    )
    assert proc.returncode != 0, "a second broker started on a data dir in use"
    assert "listening" not in proc.stdout
    assert str(broker.data_dir) in proc.stderr or "lock" in proc.stderr.lower(), proc.stderr
    # The first broker is unharmed.
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.api_versions().error_code == kw.NONE


def test_listening_line_is_the_only_stdout(broker):
    # Stopping right after the listening line also checks that SIGTERM is handled from the
    # moment the broker says it is ready.
    broker.stop()
    assert broker.stdout_lines_seen == [
        f"sluice listening kafka=127.0.0.1:{broker.last_port} admin=127.0.0.1:{broker.admin_port}\n"
    ]


def print_config(tmp_path, args: list[str], env: dict[str, str]) -> tuple[dict, dict, str]:
    """`sluice serve --print-config ARGS`: (values, source comment per key, the text)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    proc = subprocess.run(
        [sluice_bin(), "serve", "--print-config", *args],
        capture_output=True,
        text=True,
        timeout=START_DEADLINE_S,
        env=clean | env,
    )
    assert proc.returncode == 0, proc.stderr
    sources = {}
    for line in proc.stdout.splitlines():
        match = re.match(r'^"([^"]+)" = .*# (.+)$', line)
        if match:
            sources[match.group(1)] = match.group(2).strip()
    return tomllib.loads(proc.stdout), sources, proc.stdout


def test_print_config_shows_each_value_and_its_source(tmp_path):
    config = tmp_path / "sluice.toml"
    config.write_text('"num.partitions" = 5\n"log.retention.ms" = 60000\n')
    args = ["--config", str(config), "--set", "message.max.bytes=2000000", "--data-dir", str(tmp_path / "d")]
    env = {"SLUICE_LOG_RETENTION_MS": "1000", "SLUICE_ADMIN_TOKEN": "hunter2", "SLUICE_ADMIN_URL": "http://x:1"}
    values, sources, _ = print_config(tmp_path, args, env)
    assert values["num.partitions"] == "5" and sources["num.partitions"] == f"file {config}"
    assert values["log.retention.ms"] == "1000" and sources["log.retention.ms"] == "env SLUICE_LOG_RETENTION_MS"
    assert values["message.max.bytes"] == "2000000" and sources["message.max.bytes"] == "flag"
    assert values["data.dir"] == str(tmp_path / "d") and sources["data.dir"] == "flag"
    assert sources["log.segment.bytes"] == "default"
    assert values["admin.token"] != "hunter2" and "hunter2" not in str(values)

    # Without a token, the output is itself a config file that yields the same values.
    del env["SLUICE_ADMIN_TOKEN"]
    values, _, text = print_config(tmp_path, args, env)
    printed = tmp_path / "printed.toml"
    printed.write_text(text)
    again, again_sources, _ = print_config(tmp_path, ["--config", str(printed)], {})
    assert again == values
    assert again_sources["num.partitions"] == f"file {printed}"
