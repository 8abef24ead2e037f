//! The `sluice serve` process contract: the one stdout line with the bound address, config
//! errors naming the key, flags and environment overrides, and exit code 0 on SIGTERM with
//! the clean-shutdown marker written.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

fn sluice() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .env_remove("SLUICE_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// Starts `serve`, returns the child and the address from its stdout line.
fn start(dir: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut command = sluice();
    command
        .args(["serve", "--data-dir"])
        .arg(dir)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(extra);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().and_then(Result::ok);
        tx.send(first).ok();
        // Anything more on stdout breaks the contract.
        if let Some(Ok(line)) = lines.next() {
            panic!("unexpected stdout line: {line}");
        }
    });
    let line = rx.recv_timeout(DEADLINE).unwrap().expect("a stdout line");
    let addr = line
        .strip_prefix("sluice listening kafka=")
        .and_then(|rest| rest.split(" admin=").next())
        .unwrap_or_else(|| panic!("bad line {line:?}"));
    (child, addr.to_owned())
}

fn sigterm(child: &mut Child) -> std::process::ExitStatus {
    // SAFETY: kill(2) with a pid we spawned and a valid signal number.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends Metadata v1 for `topic` and returns the raw response body.
fn metadata(addr: &str, topic: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut body = Vec::new();
    body.extend_from_slice(&3i16.to_be_bytes()); // Metadata
    body.extend_from_slice(&1i16.to_be_bytes()); // v1
    body.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    body.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    body.extend_from_slice(&1i32.to_be_bytes()); // one topic
    body.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    stream
        .write_all(&(body.len() as i32).to_be_bytes())
        .unwrap();
    stream.write_all(&body).unwrap();
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).unwrap();
    let mut response = vec![0u8; i32::from_be_bytes(len) as usize];
    stream.read_exact(&mut response).unwrap();
    response
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn serve_prints_the_bound_port_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, addr) = start(dir.path(), &["--log-format", "json"], &[]);
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"),
        "{addr}"
    );
    let port = addr.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let response = metadata(&addr, "made-by-metadata");
    assert!(
        contains(&response, &i32::from(port).to_be_bytes()),
        "Metadata advertises the bound port"
    );
    let status = sigterm(&mut child);
    assert!(status.success(), "{status:?}");
    assert!(
        dir.path()
            .join("topics/made-by-metadata/0/clean-shutdown")
            .exists()
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.lines().all(|l| l.starts_with('{')),
        "JSON logs only:\n{stderr}"
    );
}

#[test]
fn flags_beat_the_environment_which_beats_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sluice.toml");
    std::fs::write(
        &file,
        "num.partitions = 2\nauto.create.topics.enable = false\n",
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let data = dir.path().join("data");
    let (mut child, addr) = start(
        &data,
        &["--config", config, "--set", "num.partitions=5"],
        &[
            ("SLUICE_NUM_PARTITIONS", "4"),
            ("SLUICE_AUTO_CREATE_TOPICS_ENABLE", "true"),
        ],
    );
    metadata(&addr, "auto");
    assert!(sigterm(&mut child).success());
    let partitions = std::fs::read_dir(data.join("topics/auto"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(partitions, 5);
}

#[test]
fn unknown_keys_and_bad_values_fail_at_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (args, env, key) in [
        (vec!["--set", "num.partitionz=3"], vec![], "num.partitionz"),
        (
            vec!["--set", "message.max.bytes=lots"],
            vec![],
            "message.max.bytes",
        ),
        (
            vec![],
            vec![("SLUICE_NUM_PARTITION", "3")],
            "SLUICE_NUM_PARTITION",
        ),
    ] {
        let mut command = sluice();
        command
            .args(["serve", "--data-dir"])
            .arg(dir.path())
            .args(["--listen", "127.0.0.1:0"])
            .args(&args);
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().unwrap();
        assert!(!output.status.success(), "{args:?}");
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(key), "{key} not named in: {stderr}");
    }
}
