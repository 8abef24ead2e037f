"""`sluice plugin` end to end with --output json parsed: deploy a real plugin to a running
broker through its admin API, list and describe it, refuse to delete it while a topic uses it
(exit 1, the API's message on stderr) and delete it with --force; the admin API is found with
`--admin-url`, `SLUICE_ADMIN_URL` or the older `--admin`/`SLUICE_ADMIN`, and a broker started
with those variables in its environment runs; `plugin test` runs the
murmur2 plugin locally on sample records and agrees with the Java client's mapping;
`plugin test` runs the json-filter and redact plugins on sample records from a file and prints
the kept and the transformed records (JSON parsed here, and the text form);
`plugin build` builds the plugins/ workspace (warm after tests/run built it; cold it takes
minutes) and lists the modules; a directory that holds no plugin is named as such;
`plugin new` scaffolds a crate whose Cargo.toml lists only sluice-sdk (test_plugin_scaffold.py:
with only the binary); `plugin logs` (and
`--follow`) shows what a partitioner logged, within the per-call and size limits.
"""

from __future__ import annotations

import json
import os
import subprocess

from confluent_kafka import Producer
from plugin_support import built_plugins_dir, murmur2_partition

from clients import create_topic
from conftest import REPO_ROOT, sluice_bin


def sluice(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sluice_bin(), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def ok_json(*args: str, cwd=None):
    result = sluice(*args, "--output", "json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_deploy_list_describe_delete(broker, topic_name):
    admin = ["--admin", broker.admin_url]
    wasm = str(built_plugins_dir() / "murmur2.wasm")
    info = ok_json("plugin", "deploy", wasm, "--name", "keyhash", *admin)
    assert info["name"] == "keyhash" and info["kind"] == "partitioner"
    assert ok_json("plugin", "list", *admin) == [info]
    assert ok_json("plugin", "describe", "keyhash", *admin)["sha256"] == info["sha256"]
    # The name defaults to the file name.
    assert ok_json("plugin", "deploy", wasm, *admin)["name"] == "murmur2"

    create_topic(broker.bootstrap, topic_name, 3, {"sluice.partitioner": "keyhash"})
    refused = sluice("plugin", "delete", "keyhash", *admin)
    assert refused.returncode == 1 and "in use" in refused.stderr, refused.stderr
    assert ok_json("plugin", "delete", "keyhash", "--force", *admin) == {"deleted": "keyhash"}
    assert [p["name"] for p in ok_json("plugin", "list", *admin)] == ["murmur2"]

    missing = sluice("plugin", "describe", "nope", *admin)
    assert missing.returncode == 1 and "no plugin named" in missing.stderr


def test_plugin_logs_show_what_the_guest_logged_within_the_limits(broker, topic_name):
    """hostile-panic logs an error before it panics on key `panic`, and 1,000 messages of
    4,000 bytes for key `chatty`: `plugin logs` shows the error, the chatty lines cut to the
    per-call budget and the message size, and counts what it dropped."""
    admin = ["--admin", broker.admin_url]
    ok_json("plugin", "deploy", str(built_plugins_dir() / "hostile-panic.wasm"), "--name", "boom", *admin)
    assert ok_json("plugin", "logs", "boom", *admin)["lines"] == []
    create_topic(broker.bootstrap, topic_name, 2, {"sluice.partitioner": "boom"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    failed = []
    producer.produce(topic_name, b"v", key=b"panic", on_delivery=lambda err, _msg: failed.append(err))
    producer.produce(topic_name, b"v", key=b"chatty")
    assert producer.flush(30) == 0
    assert failed and failed[0] is not None, "the trapping partitioner fails the produce"

    page = ok_json("plugin", "logs", "boom", *admin)
    levels = [(line["level"], line["message"][:30]) for line in page["lines"]]
    assert ("error", "about to panic on purpose") in levels, levels
    chatty = [line for line in page["lines"] if line["message"].startswith("message ")]
    assert len(chatty) == 16, "LOG_MESSAGES_PER_CALL_MAX per call"
    assert all(len(line["message"].encode()) <= 1024 for line in chatty), "LOG_MESSAGE_BYTES_MAX"
    assert page["dropped"] == 1000 - 16
    seqs = [line["seq"] for line in page["lines"]]
    assert seqs == list(range(1, len(seqs) + 1)) and page["next_after"] == seqs[-1]
    assert {line["version"] for line in page["lines"]} == {ok_json("plugin", "describe", "boom", *admin)["sha256"][:12]}
    # After the last line seen: nothing new; the text form has one line per message.
    assert ok_json("plugin", "logs", "boom", "--after", str(seqs[-1]), *admin)["lines"] == []
    text = sluice("plugin", "logs", "boom", *admin)
    assert text.returncode == 0 and "error [" in text.stdout and "984 messages cut" in text.stdout, text.stdout
    # --follow prints what comes later, one JSON object per line.
    follow = subprocess.Popen(
        [sluice_bin(), "plugin", "logs", "boom", "--follow", "--after", str(seqs[-1]), "--output", "json", *admin],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        producer.produce(topic_name, b"v", key=b"panic")
        producer.flush(30)
        line = json.loads(follow.stdout.readline())
        assert (line["level"], line["message"], line["seq"]) == ("error", "about to panic on purpose", seqs[-1] + 1)
    finally:
        follow.kill()
        follow.wait()
    missing = sluice("plugin", "logs", "nope", *admin)
    assert missing.returncode == 1 and "no plugin named" in missing.stderr


def test_admin_url_flag_environment_and_older_names(broker_factory):
    # The broker refuses unknown SLUICE_* variables: these two must not stop it.
    broker = broker_factory(env={"SLUICE_ADMIN_URL": "http://127.0.0.1:1", "SLUICE_ADMIN": "127.0.0.1:1"})
    url = broker.admin_url
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}

    def plugin_list(*args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sluice_bin(), "plugin", "list", "--output", "json", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean | env,
        )

    for args, env in [
        (["--admin-url", url], {}),
        (["--admin-url", url + "/"], {"SLUICE_ADMIN_URL": "http://127.0.0.1:1"}),
        ([], {"SLUICE_ADMIN_URL": url}),
        (["--admin", url.removeprefix("http://")], {}),
        ([], {"SLUICE_ADMIN": url}),
    ]:
        listed = plugin_list(*args, **env)
        assert listed.returncode == 0, (args, env, listed.stderr)
        assert json.loads(listed.stdout) == []
    nobody = plugin_list("--admin-url", "http://127.0.0.1:1")
    assert nobody.returncode == 3 and "--admin-url" in nobody.stderr, nobody.stderr
    # https:// is spoken too (test_admin_auth.py covers it against a broker); nothing there.
    https = plugin_list("--admin-url", "https://127.0.0.1:1")
    assert https.returncode == 3 and "--admin-url" in https.stderr, https.stderr


def test_plugin_test_runs_a_partitioner_locally(tmp_path):
    keys = [f"user-{i}" for i in range(50)]
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps({"key": k, "value": {"n": i}}) for i, k in enumerate(keys)) + "\n")
    wasm = str(built_plugins_dir() / "murmur2.wasm")
    doc = ok_json("plugin", "test", wasm, "--records", str(records), "--partitions", "7")
    assert doc["kind"] == "partitioner"
    assert [r["partition"] for r in doc["records"]] == [murmur2_partition(k.encode(), 7) for k in keys]
    bad = sluice("plugin", "test", wasm, "--records", str(records), "--param", "x=1")
    assert bad.returncode == 1 and "parameters" in bad.stderr, bad.stderr


SAMPLES = [
    {"key": "o1", "value": {"region": "eu", "card_number": "4111-1111", "total": 30}, "headers": {"src": "web"}},
    {"key": "o2", "value": {"region": "us", "card_number": "5500-0000", "total": 80}},
    {"key": "o3", "value": {"region": "eu", "card_number": "3400-0000", "total": 55}},
    {"key": None, "value": None},
]


def write_samples(tmp_path) -> str:
    path = tmp_path / "orders.jsonl"
    # Values written without spaces: a transform's output is compared byte for byte.
    path.write_text("\n".join(json.dumps(s, separators=(",", ":")) for s in SAMPLES) + "\nnot json at all\n")
    return str(path)


def test_plugin_test_runs_a_filter_locally(tmp_path):
    records = write_samples(tmp_path)
    wasm = str(built_plugins_dir() / "json-filter.wasm")
    params = ["--param", "field=$.region", "--param", "op===", "--param", "value=eu"]
    doc = ok_json("plugin", "test", wasm, "--records", records, *params)
    assert doc["kind"] == "filter"
    assert (doc["kept"], doc["total"]) == (2, 5)
    assert [r["offset"] for r in doc["records"] if r["kept"]] == [0, 2]
    assert doc["records"][0]["headers"] == {"src": "web"}
    assert doc["records"][0]["value"] == json.dumps(SAMPLES[0]["value"], separators=(",", ":"))
    text = sluice("plugin", "test", wasm, "--records", records, *params)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert [line.split("\t")[1] for line in lines[:-1]] == ["o1", "o3"]
    assert lines[-1] == "kept 2 of 5 records"
    missing = sluice("plugin", "test", wasm, "--records", records)
    assert missing.returncode == 1 and "field" in missing.stderr, missing.stderr


def test_plugin_test_runs_a_transform_locally(tmp_path):
    records = write_samples(tmp_path)
    wasm = str(built_plugins_dir() / "redact.wasm")
    doc = ok_json("plugin", "test", wasm, "--records", records, "--param", "fields=card_number")
    assert doc["kind"] == "transform"
    # Objects are masked; the tombstone passes; the line that is not JSON is dropped.
    assert (doc["input_records"], doc["output_records"]) == (5, 4)
    out = {r["offset"]: r for r in doc["records"]}
    assert sorted(out) == [0, 1, 2, 3]
    for offset in (0, 1, 2):
        value = json.loads(out[offset]["value"])
        assert value == SAMPLES[offset]["value"] | {"card_number": "****"}
        assert out[offset]["key"] == SAMPLES[offset]["key"]
    assert out[0]["headers"] == {"src": "web"}
    assert out[3]["value"] is None
    dropped = ok_json("plugin", "test", wasm, "--records", records, "--param", "fields=card_number", "--param", "mode=drop")
    assert all("card_number" not in json.loads(r["value"]) for r in dropped["records"] if r["value"])
    text = sluice("plugin", "test", wasm, "--records", records, "--param", "fields=card_number")
    assert text.returncode == 0 and text.stdout.splitlines()[-1] == "5 records in, 4 out", text.stdout


def test_plugin_test_shows_where_a_splitting_transform_routes_each_record(tmp_path):
    records = write_samples(tmp_path)
    wasm = str(built_plugins_dir() / "split-transform.wasm")
    params = ["--param", "field=$.region", "--param", "value=eu", "--param", "unparseable=dead-letter"]
    outputs = ["--to", "orders-eu", "--to", "orders-us", "--to", "orders-dlq"]
    doc = ok_json("plugin", "test", wasm, "--records", records, *params, *outputs)
    assert [(r["offset"], r["output"]) for r in doc["records"]] == [
        (0, "orders-eu"), (1, "orders-us"), (2, "orders-eu"), (3, "orders-dlq"), (4, "orders-dlq"),
    ]
    assert all("sluice.output" not in r["headers"] for r in doc["records"])
    assert doc["records"][3]["headers"] == {"split.reason": "no value"}
    text = sluice("plugin", "test", wasm, "--records", records, *params, *outputs)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].endswith("\t-> orders-eu"), text.stdout
    # Without --to it runs as a view does: the first output only.
    view = ok_json("plugin", "test", wasm, "--records", records, *params)
    assert [r["offset"] for r in view["records"]] == [0, 2]
    # A third output the transform was not given breaks the contract, named.
    two = sluice("plugin", "test", wasm, "--records", records, *params, "--to", "a", "--to", "b")
    assert two.returncode == 1 and "has 2 outputs" in two.stderr, two.stderr


def test_plugin_new_scaffolds_a_crate_that_lists_only_the_sdk(tmp_path):
    doc = ok_json("plugin", "new", "my-router", "--kind", "partitioner", "--sdk", str(REPO_ROOT / "sdk"), cwd=tmp_path)
    assert doc == {"created": "my-router", "kind": "partitioner", "lang": "rust"}
    manifest = (tmp_path / "my-router" / "Cargo.toml").read_text()
    deps = manifest.split("[dependencies]")[1].split("[")[0].strip().splitlines()
    assert len(deps) == 1 and deps[0].startswith("sluice-sdk"), deps
    assert "#[partitioner]" in (tmp_path / "my-router" / "src" / "lib.rs").read_text()


def test_plugin_build_builds_a_plugin_workspace(tmp_path):
    doc = ok_json("plugin", "build", "plugins", cwd=REPO_ROOT)
    built = {p.rsplit("/", 1)[-1] for p in doc["built"]}
    assert {"murmur2.wasm", "json-filter.wasm", "redact.wasm"} <= built, built
    for path in doc["built"]:
        assert (REPO_ROOT / path).read_bytes()[:4] == b"\0asm", path
    elsewhere = sluice("plugin", "build", str(tmp_path), cwd=tmp_path)
    assert elsewhere.returncode == 1 and "not a plugin" in elsewhere.stderr, elsewhere.stderr
