//! Shared helpers for the server's integration tests: a broker on an ephemeral port over a
//! temp dir, and a raw-socket Kafka client that encodes with kafka-protocol.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records;
use sluice_server::{BrokerConfig, Seams, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A Kafka string from `text`.
pub fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A topic name from `topic`.
pub fn name(topic: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(StrBytes::from_string(topic.to_owned()))
}

/// Creates `topic` with `partitions` through CreateTopics v4; asserts it was created.
pub async fn create_topic(client: &mut Client, topic: &str, partitions: i32) {
    create_topic_with(client, topic, partitions, &[]).await;
}

/// Same, with topic configs (`retention.ms`, ...).
pub async fn create_topic_with(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
    let mut t = CreatableTopic::default();
    t.name = name(topic);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    t.configs = configs
        .iter()
        .map(|(k, v)| {
            let mut config = CreatableTopicConfig::default();
            config.name = s(k);
            config.value = Some(s(v));
            config
        })
        .collect();
    let mut request = CreateTopicsRequest::default();
    request.topics = vec![t];
    request.timeout_ms = 5000;
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 4, &request).await;
    assert_eq!(response.topics[0].error_code, 0);
}

/// Creates `topic` through Metadata v8 auto-creation; asserts it was created.
pub async fn create(client: &mut Client, topic: &str) {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, MetadataResponse};
    let mut request = MetadataRequest::default();
    let mut t = MetadataRequestTopic::default();
    t.name = Some(name(topic));
    request.topics = Some(vec![t]);
    request.allow_auto_topic_creation = true;
    let response: MetadataResponse = client.call(ApiKey::Metadata, 8, &request).await;
    assert_eq!(response.topics[0].error_code, 0);
}

/// A Produce request of `records` to one partition (timeout 5 s).
pub fn produce_request(
    topic: &str,
    partition: i32,
    acks: i16,
    records: Bytes,
) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::ProduceRequest;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let mut p = PartitionProduceData::default();
    p.index = partition;
    p.records = Some(records);
    let mut t = TopicProduceData::default();
    t.name = name(topic);
    t.partition_data = vec![p];
    let mut r = ProduceRequest::default();
    r.acks = acks;
    r.timeout_ms = 5000;
    r.topic_data = vec![t];
    r
}

/// Produces `records` to one partition (Produce v8); returns that partition's response.
pub async fn produce(
    client: &mut Client,
    topic: &str,
    partition: i32,
    acks: i16,
    records: Bytes,
) -> kafka_protocol::messages::produce_response::PartitionProduceResponse {
    use kafka_protocol::messages::ProduceResponse;
    let request = produce_request(topic, partition, acks, records);
    let response: ProduceResponse = client.call(ApiKey::Produce, 8, &request).await;
    response.responses[0].partition_responses[0].clone()
}

/// Sends `request` at every served version of `key` that can encode it; returns
/// (version, `code` of the decoded response) for each. CreateTopics v0-v1 are skipped:
/// the client-side codec starts at v2 (the broker serves them by shim).
pub async fn at_every_version<Req: Encodable, Resp: Decodable>(
    client: &mut Client,
    key: ApiKey,
    request: &Req,
    code: impl Fn(&Resp) -> i16,
) -> Vec<(i16, i16)> {
    let support = sluice_protocol::versions::lookup(key as i16).unwrap();
    let mut codes = Vec::new();
    for version in support.served_min..=support.max {
        // Fields newer than `version` make kafka-protocol refuse to encode; then the
        // request simply does not exist at that version.
        let mut probe = BytesMut::new();
        if request.encode(&mut probe, version).is_err() {
            continue;
        }
        if key == ApiKey::CreateTopics && version < 2 {
            continue;
        }
        let response: Resp = client.call(key, version, request).await;
        codes.push((version, code(&response)));
    }
    codes
}

/// Deadline for anything a test waits on.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// A running broker; dropping it without `stop` aborts it.
pub struct TestBroker {
    pub addr: SocketAddr,
    pub broker: std::sync::Arc<sluice_server::broker::Broker>,
    dir: Option<tempfile::TempDir>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), sluice_server::ServerError>>>,
}

impl TestBroker {
    pub async fn start(sets: &[(&str, &str)]) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), sets).await
    }

    pub async fn start_in(dir: tempfile::TempDir, sets: &[(&str, &str)]) -> Self {
        Self::start_seams(dir, sets, Seams::default()).await
    }

    /// A broker whose partition logs live on `fs`.
    pub async fn start_with(
        dir: tempfile::TempDir,
        sets: &[(&str, &str)],
        fs: std::sync::Arc<dyn sluice_storage::Fs>,
    ) -> Self {
        Self::start_seams(
            dir,
            sets,
            Seams {
                fs,
                ..Seams::default()
            },
        )
        .await
    }

    /// A broker reading the world through `seams` (a faulty filesystem, a manual clock).
    pub async fn start_seams(dir: tempfile::TempDir, sets: &[(&str, &str)], seams: Seams) -> Self {
        let mut config = config_for(dir.path());
        for (k, v) in sets {
            config.set(k, v).unwrap();
        }
        let server = Server::bind_seams(config, seams).await.unwrap();
        let addr = server.local_addr();
        let broker = server.broker();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        Self {
            addr,
            broker,
            dir: Some(dir),
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Graceful shutdown; returns the data dir for a restart.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.stop.take().unwrap().send(()).ok();
        let task = self.task.take().unwrap();
        tokio::time::timeout(DEADLINE, task)
            .await
            .expect("shutdown within the deadline")
            .unwrap()
            .unwrap();
        self.dir.take().unwrap()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.as_ref().unwrap().path()
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Polls `condition` until it holds or the deadline passes.
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

pub fn config_for(dir: &Path) -> BrokerConfig {
    let mut config = BrokerConfig::default();
    config.set("listeners", "127.0.0.1:0").unwrap();
    config.data_dir = dir.to_owned();
    config.acks_all_fsync = false;
    config
}

/// A raw Kafka client: one request at a time or pipelined.
pub struct Client {
    pub stream: TcpStream,
    next_correlation_id: i32,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Self {
        let stream = TcpStream::connect(addr).await.unwrap();
        Self {
            stream,
            next_correlation_id: 1,
        }
    }

    /// Encodes and sends a request; returns its correlation id.
    pub async fn send<R: Encodable>(&mut self, key: ApiKey, version: i16, request: &R) -> i32 {
        let frame = encode_request(key, version, self.next_correlation_id, request);
        self.next_correlation_id += 1;
        self.stream.write_all(&frame).await.unwrap();
        self.next_correlation_id - 1
    }

    /// Sends raw bytes.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Reads one response frame body; `None` if the broker closed the connection.
    pub async fn recv_frame(&mut self) -> Option<Bytes> {
        let read = async {
            let mut prefix = [0u8; 4];
            self.stream.read_exact(&mut prefix).await.ok()?;
            let mut body = vec![0u8; i32::from_be_bytes(prefix) as usize];
            self.stream.read_exact(&mut body).await.ok()?;
            Some(Bytes::from(body))
        };
        tokio::time::timeout(DEADLINE, read)
            .await
            .expect("a response or a close within the deadline")
    }

    /// Reads and decodes one response; returns (correlation id, response).
    pub async fn recv<T: Decodable>(&mut self, key: ApiKey, version: i16) -> (i32, T) {
        let mut body = self.recv_frame().await.expect("a response");
        let header =
            ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
        let response = T::decode(&mut body, version).unwrap();
        assert_eq!(
            body.remaining(),
            0,
            "{key:?} v{version} response has trailing bytes"
        );
        (header.correlation_id, response)
    }

    pub async fn call<R: Encodable, T: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &R,
    ) -> T {
        let id = self.send(key, version, request).await;
        let (got, response) = self.recv(key, version).await;
        assert_eq!(got, id, "correlation id");
        response
    }

    /// True if the broker closes the connection (reads EOF) within the deadline.
    pub async fn closed_by_broker(&mut self) -> bool {
        let mut buf = [0u8; 1024];
        let read = async {
            loop {
                match self.stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(DEADLINE, read).await.unwrap_or(false)
    }
}

pub fn encode_request<R: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &R,
) -> Bytes {
    let mut header = RequestHeader::default();
    header.request_api_key = key as i16;
    header.request_api_version = version;
    header.correlation_id = correlation_id;
    header.client_id = Some(StrBytes::from_static_str("sluice-test"));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, key.request_header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(&body);
    frame.freeze()
}

/// One uncompressed RecordBatch v2 holding `values` (keys `k0`, `k1`, ...), stamped now.
pub fn batch(values: &[&str]) -> Bytes {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    batch_at(values, now_ms)
}

/// Same, with record timestamps from `first_timestamp_ms` on.
pub fn batch_at(values: &[&str], first_timestamp_ms: i64) -> Bytes {
    let now_ms = first_timestamp_ms;
    let records: Vec<records::Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| records::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: records::TimestampType::Creation,
            offset: i as i64,
            sequence: -1,
            timestamp: now_ms + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = records::RecordEncodeOptions {
        version: 2,
        compression: records::Compression::None,
    };
    records::RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.freeze()
}

/// Decodes record values from fetched record-set bytes.
pub fn values(mut records: Bytes) -> Vec<String> {
    let sets = records::RecordBatchDecoder::decode_all(&mut records).unwrap();
    sets.into_iter()
        .flat_map(|s| s.records)
        .map(|r| String::from_utf8(r.value.unwrap_or_default().to_vec()).unwrap())
        .collect()
}

/// An ApiVersions request as a client sends it at v3+: with its software name and version
/// (KIP-511; empty ones are INVALID_REQUEST, as Kafka answers).
pub fn api_versions_request() -> kafka_protocol::messages::ApiVersionsRequest {
    let mut request = kafka_protocol::messages::ApiVersionsRequest::default();
    request.client_software_name =
        kafka_protocol::protocol::StrBytes::from_static_str("sluice-tests");
    request.client_software_version = kafka_protocol::protocol::StrBytes::from_static_str("1.0");
    request
}
