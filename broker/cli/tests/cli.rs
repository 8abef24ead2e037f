//! End to end: every `sluice` operator command (topic, produce, consume, cluster, group, serve
//! --print-config) and the admin HTTP API against a real `sluice serve` on ephemeral ports.
//! Commands run as subprocesses with `--output json` and the tests parse what they print;
//! the admin API is spoken with a minimal HTTP/1.1 client over a TcpStream. No sleeps:
//! every wait polls with a deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(30);

/// A running broker: its Kafka and admin addresses; SIGTERM and a clean exit on drop.
struct Broker {
    child: Child,
    kafka: String,
    admin: String,
    _dir: tempfile::TempDir,
}

impl Broker {
    fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--data-dir"])
            .arg(dir.path().join("data"))
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(extra)
            .env_remove("SLUICE_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let line = BufReader::new(stdout).lines().next().and_then(Result::ok);
            tx.send(line).ok();
        });
        let line = rx
            .recv_timeout(DEADLINE)
            .unwrap()
            .expect("a listening line");
        let rest = line.strip_prefix("sluice listening kafka=").unwrap();
        let (kafka, admin) = rest.split_once(" admin=").expect("an admin address");
        Self {
            child,
            kafka: kafka.to_owned(),
            admin: admin.to_owned(),
            _dir: dir,
        }
    }

    /// Runs `sluice <args> --brokers <this broker>`.
    fn sluice(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .args(["--brokers", &self.kafka])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs a command with `--output json`, asserts success, parses stdout.
    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--output", "json"]);
        let out = self.sluice(&all, b"");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    /// One HTTP/1.1 request to the admin API: (status, body).
    fn http(&self, method: &str, path: &str, body: &str, token: Option<&str>) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.admin).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let auth = token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.admin,
            body.len()
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response[9..12].parse().unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(body)
        } else {
            body.to_owned()
        };
        (status, body)
    }

    fn metric(&self, name_and_labels: &str) -> Option<f64> {
        let (_, text) = self.http("GET", "/metrics", "", None);
        text.lines().find_map(|l| {
            l.strip_prefix(name_and_labels)?
                .strip_prefix(' ')?
                .parse()
                .ok()
        })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid we spawned and a valid signal number.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + DEADLINE;
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "no exit after SIGTERM");
            std::thread::yield_now();
        }
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn topic_create_list_describe_delete() {
    let b = Broker::start(&[]);
    let created = b.json(&[
        "topic",
        "create",
        "orders",
        "-p",
        "3",
        "-c",
        "retention.ms=3600000",
    ]);
    assert_eq!(created["created"][0]["topic"], "orders");
    let listed = b.json(&["topic", "list"]);
    assert_eq!(listed["topics"][0]["topic"], "orders");
    assert_eq!(listed["topics"][0]["partitions"], 3);
    let described = b.json(&["topic", "describe", "orders"]);
    assert_eq!(described["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(described["partitions"][2]["log_end_offset"], 0);
    assert_eq!(described["configs"]["retention.ms"]["value"], "3600000");
    assert_eq!(described["configs"]["retention.ms"]["default"], false);

    let again = b.sluice(&["topic", "create", "orders"], b"");
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("TopicAlreadyExists"),
        "{}",
        stderr(&again)
    );

    b.json(&["topic", "delete", "orders"]);
    assert!(
        b.json(&["topic", "list"])["topics"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let missing = b.sluice(&["topic", "describe", "orders"], b"");
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("sluice topic create orders"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn produce_then_consume_with_keys_headers_compression_format_and_grep() {
    let b = Broker::start(&[]);
    b.json(&["topic", "create", "events", "-p", "2"]);
    let input: String = (0..100).map(|i| format!("key{i}:value{i}\n")).collect();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let out = b.sluice(
            &[
                "produce", "events", "-K", ":", "-H", "src=test", "-z", codec, "--output", "json",
            ],
            input.as_bytes(),
        );
        assert!(out.status.success(), "{codec}: {}", stderr(&out));
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["records"], 100);
    }
    let out = b.sluice(&["consume", "events", "-e", "--output", "json"], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let records: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 500);
    let first = records.iter().find(|r| r["key"] == "key7").unwrap();
    assert_eq!(first["value"], "value7");
    assert_eq!(first["headers"]["src"], "test");
    // Keyed records go where the Java client's murmur2 partitioner puts them: one partition
    // per key, in order.
    let partitions: std::collections::BTreeSet<_> = records
        .iter()
        .filter(|r| r["key"] == "key7")
        .map(|r| r["partition"].as_i64().unwrap())
        .collect();
    assert_eq!(partitions.len(), 1);

    let out = b.sluice(
        &[
            "consume",
            "events",
            "-n",
            "3",
            "--grep",
            "value42",
            "-f",
            "%k=%s@%p/%o %h\\n",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("key42=value42@") && l.ends_with(" src=test")),
        "{text}"
    );
}

#[test]
fn consume_from_offset_and_timestamp_and_with_a_group() {
    let b = Broker::start(&[]);
    b.json(&["topic", "create", "log", "-p", "1"]);
    let input: String = (0..10).map(|i| format!("r{i}\n")).collect();
    assert!(
        b.sluice(&["produce", "log"], input.as_bytes())
            .status
            .success()
    );
    let out = b.sluice(&["consume", "log", "-o", "7", "-e"], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "r7\nr8\nr9\n");
    let out = b.sluice(&["consume", "log", "--from-timestamp", "0", "-n", "1"], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "r0\n");
    let out = b.sluice(&["consume", "log", "-o", "end", "-e"], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "");

    // A group remembers where the last run stopped.
    let out = b.sluice(&["consume", "log", "-g", "readers", "-n", "4"], b"");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "r0\nr1\nr2\nr3\n",
        "{}",
        stderr(&out)
    );
    let described = b.json(&["group", "describe", "readers"]);
    assert!(described.to_string().contains("\"lag\":6"), "{described}");
    let out = b.sluice(&["consume", "log", "-g", "readers", "-e"], b"");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "r4\nr5\nr6\nr7\nr8\nr9\n"
    );
    let (status, body) = b.http("GET", "/v1/groups/readers", "", None);
    assert_eq!(status, 200, "{body}");
    let group: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(group["offsets"][0]["committed_offset"], 10);
    assert_eq!(group["total_lag"], 0);
    let (status, body) = b.http("GET", "/v1/groups", "", None);
    assert_eq!(status, 200);
    assert!(body.contains("\"readers\""), "{body}");
}

#[test]
fn cluster_info_and_exit_codes() {
    let b = Broker::start(&[]);
    let info = b.json(&["cluster", "info"]);
    assert!(info["cluster_id"].as_str().is_some_and(|c| !c.is_empty()));
    assert_eq!(
        info["brokers"][0]["port"].as_i64().unwrap().to_string(),
        b.kafka.rsplit(':').next().unwrap()
    );
    assert!(
        info["apis"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["api"] == "Produce")
    );

    let unreachable = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["topic", "list", "--brokers", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(3));
    assert!(
        stderr(&unreachable).contains("sluice serve"),
        "{}",
        stderr(&unreachable)
    );
    let usage = b.sluice(&["consume"], b"");
    assert_eq!(usage.status.code(), Some(2));
}

#[test]
fn admin_api_topics_health_and_errors() {
    let b = Broker::start(&[]);
    assert_eq!(b.http("GET", "/health", "", None).0, 200);
    assert_eq!(b.http("GET", "/ready", "", None).0, 200);
    let (status, body) = b.http(
        "POST",
        "/v1/topics",
        r#"{"name":"web","partitions":2,"configs":{"retention.ms":"60000"}}"#,
        None,
    );
    assert_eq!(status, 201, "{body}");
    let topic: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(topic["partition_count"], 2);
    assert_eq!(topic["configs"]["retention.ms"], "60000");
    let (status, body) = b.http("POST", "/v1/topics", r#"{"name":"web"}"#, None);
    assert_eq!(status, 409, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["code"], "TOPIC_ALREADY_EXISTS");
    let (status, body) = b.http("POST", "/v1/topics", r#"{"nam":"x"}"#, None);
    assert_eq!(status, 400, "{body}");
    let (status, body) = b.http("GET", "/v1/topics", "", None);
    assert_eq!(status, 200);
    assert!(body.contains("\"web\""));
    assert_eq!(b.http("DELETE", "/v1/topics/web", "", None).0, 200);
    let (status, body) = b.http("GET", "/v1/topics/web", "", None);
    assert_eq!(status, 404);
    assert!(body.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{body}");
    assert_eq!(b.http("GET", "/v1/nothing", "", None).0, 404);
}

#[test]
fn admin_token_guards_everything_but_health() {
    let b = Broker::start(&["--set", "admin.token=s3cret"]);
    assert_eq!(b.http("GET", "/health", "", None).0, 200);
    let (status, body) = b.http("GET", "/v1/topics", "", None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("UNAUTHORIZED"));
    assert_eq!(b.http("GET", "/v1/topics", "", Some("wrong")).0, 401);
    assert_eq!(b.http("GET", "/v1/topics", "", Some("s3cret")).0, 200);
    assert_eq!(b.http("GET", "/metrics", "", None).0, 401);
}

#[test]
fn metrics_count_what_was_produced_and_consumed() {
    let b = Broker::start(&[]);
    b.json(&["topic", "create", "m", "-p", "1"]);
    let input: String = (0..250).map(|i| format!("record-{i}\n")).collect();
    assert!(
        b.sluice(&["produce", "m"], input.as_bytes())
            .status
            .success()
    );
    let out = b.sluice(&["consume", "m", "-e"], b"");
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 250);
    let labels = "{topic=\"m\",partition=\"0\"}";
    let size = b
        .metric(&format!("sluice_partition_size_bytes{labels}"))
        .unwrap();
    assert_eq!(
        b.metric(&format!("sluice_partition_records_in_total{labels}")),
        Some(250.0)
    );
    assert_eq!(
        b.metric(&format!("sluice_partition_records_out_total{labels}")),
        Some(250.0)
    );
    assert_eq!(
        b.metric(&format!("sluice_partition_bytes_in_total{labels}")),
        Some(size)
    );
    assert_eq!(
        b.metric(&format!("sluice_partition_bytes_out_total{labels}")),
        Some(size)
    );
    assert_eq!(
        b.metric(&format!("sluice_partition_log_end_offset{labels}")),
        Some(250.0)
    );
    let produces = b
        .metric("sluice_request_duration_seconds_count{api=\"Produce\"}")
        .unwrap();
    assert!(produces >= 1.0);
    assert_eq!(
        b.metric("sluice_request_duration_seconds_bucket{api=\"Produce\",le=\"+Inf\"}"),
        Some(produces)
    );
}

#[test]
fn print_config_names_each_source_and_hides_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sluice.toml");
    std::fs::write(&file, "\"num.partitions\" = 4\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--print-config", "--config"])
        .arg(&file)
        .args([
            "--set",
            "admin.token=hidden-value",
            "--listen",
            "127.0.0.1:9999",
        ])
        .env("SLUICE_LOG_RETENTION_MS", "1000")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("\"{key}\"")))
            .unwrap()
            .to_owned()
    };
    assert!(line("num.partitions").contains("# file "), "{text}");
    assert!(
        line("log.retention.ms").contains("# env SLUICE_LOG_RETENTION_MS"),
        "{text}"
    );
    assert!(
        line("listeners").contains("127.0.0.1:9999") && line("listeners").ends_with("# flag"),
        "{text}"
    );
    assert!(line("data.dir").ends_with("# default"), "{text}");
    assert!(!text.contains("hidden-value"), "{text}");
}

#[test]
fn topic_alter_config_sets_and_drops_overrides_over_kafka_and_http() {
    let b = Broker::start(&[]);
    b.json(&["topic", "create", "cfg", "-c", "retention.ms=3600000"]);
    let config = |b: &Broker| b.json(&["topic", "describe", "cfg"])["configs"].clone();

    let dry = b.json(&[
        "topic",
        "alter-config",
        "cfg",
        "--set",
        "segment.bytes=1048576",
        "--dry-run",
    ]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(config(&b)["segment.bytes"]["default"], true);

    b.json(&[
        "topic",
        "alter-config",
        "cfg",
        "--set",
        "segment.bytes=1048576",
        "--delete",
        "retention.ms",
    ]);
    let c = config(&b);
    assert_eq!(c["segment.bytes"]["value"], "1048576");
    assert_eq!(c["segment.bytes"]["default"], false);
    assert_eq!(c["retention.ms"]["default"], true);

    let bad = b.sluice(
        &[
            "topic",
            "alter-config",
            "cfg",
            "--set",
            "cleanup.policy=compacted",
        ],
        b"",
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("InvalidConfig"), "{}", stderr(&bad));

    let (status, body) = b.http(
        "PATCH",
        "/v1/topics/cfg",
        r#"{"set":{"retention.ms":"60000"},"delete":["segment.bytes"]}"#,
        None,
    );
    assert_eq!(status, 200, "{body}");
    let topic: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        topic["overrides"],
        serde_json::json!({"retention.ms": "60000"})
    );
    let (status, body) = b.http("PATCH", "/v1/topics/cfg", r#"{"set":{"nope":"1"}}"#, None);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("INVALID_CONFIG"), "{body}");
}

#[test]
fn an_admin_client_holding_a_connection_does_not_hold_up_shutdown() {
    let mut b = Broker::start(&[]);
    let _idle = TcpStream::connect(&b.admin).unwrap();
    let mut half = TcpStream::connect(&b.admin).unwrap();
    half.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // SAFETY: kill(2) with a pid we spawned and a valid signal number.
    unsafe { libc::kill(b.child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = b.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the broker did not exit within 10 s"
        );
        std::thread::yield_now();
    };
    assert!(status.success(), "{status:?}");
}
