"""Request bodies for every API the broker serves, as `kafka_wire.Fields` (so the adversarial
fuzzer knows their field boundaries), and decoders for the few answers the hostile-input
tests read. Non-flexible versions, except the few APIs whose only version is flexible; field
layouts from https://kafka.apache.org/protocol. Produce and Fetch bodies live in
kafka_wire.py beside the connection that uses them.

`sample_request(api_key, version, names)` is the fuzzer's catalog: one valid request per
(api key, version), aimed at the scratch topic and group in `names` so mutations cannot
touch the data the tests check.
"""

from __future__ import annotations

from dataclasses import dataclass

import kafka_spec
import kafka_wire as kw
from kafka_wire import Fields, KafkaConnection

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
CONFIG_OP_SET = 0


def list_offsets_body(version: int, partitions: list[tuple[str, int]], timestamp: int = -1) -> Fields:
    """ListOffsets v1-v10 of (topic, partition) entries (consecutive ones of a topic share a
    topic entry, so a repeated partition stays repeated); timestamp -1 latest, -2 earliest,
    -3 the largest timestamp (v7+). v6+ are flexible; v10 adds a timeout."""
    flexible = version >= 6
    f = Fields().i32(-1)  # replica id
    if version >= 2:
        f.i8(0)  # isolation level
    grouped: list[tuple[str, list[Fields]]] = []
    for topic, partition in partitions:
        part = Fields().i32(partition)
        if version >= 4:
            part.i32(-1)  # current leader epoch
        part.i64(timestamp)
        if flexible:
            part.tagged_fields()
        if grouped and grouped[-1][0] == topic:
            grouped[-1][1].append(part)
        else:
            grouped.append((topic, [part]))
    if not flexible:
        return f.array([Fields().string(t).array(parts) for t, parts in grouped])
    f.compact_array([Fields().compact_string(t).compact_array(parts).tagged_fields() for t, parts in grouped])
    if version >= 10:
        f.i32(30_000)  # timeout
    return f.tagged_fields()


def list_offsets(
    conn: KafkaConnection, partitions: list[tuple[str, int]], timestamp: int = -1, version: int = 1
) -> list[tuple[str, int, int, int]]:
    """(topic, partition, error, offset) of every answered entry, in response order (v1-v5)."""
    assert version <= 5, "the response of v6+ is flexible"
    r = conn.request(kw.API_LIST_OFFSETS, version, list_offsets_body(version, partitions, timestamp))
    if version >= 2:
        r.i32()  # throttle time

    def part(x):
        partition, error, _ts, offset = x.i32(), x.i16(), x.i64(), x.i64()
        if version >= 4:
            x.i32()  # leader epoch
        return partition, error, offset

    out = []
    for name, parts in r.array(lambda x: (x.string(), x.array(part))):
        out += [(name, p, e, o) for p, e, o in parts]
    return out


def metadata_body(version: int, topics: list[str] | None) -> Fields:
    if version >= 9:  # flexible
        def entry(name: str) -> Fields:
            f = Fields()
            if version >= 10:
                f.uuid()  # topic id: none
            return f.compact_string(name).tagged_fields()

        f = Fields().compact_array(None if topics is None else [entry(t) for t in topics]).bool(True)
        if version <= 10:
            f.bool(False)  # include cluster authorized operations
        return f.bool(False).tagged_fields()
    f = Fields()
    if version == 0:
        f.string_array(topics or [])
    else:
        f.string_array(topics)
    if version >= 4:
        f.bool(True)  # allow auto topic creation
    if version >= 8:
        f.bool(False).bool(False)  # include cluster / topic authorized operations
    return f


def create_topics_body(version: int, topics: list[tuple[str, int]], validate_only: bool = False) -> Fields:
    items = [
        Fields().string(name).i32(partitions).i16(1).array([]).array([]) for name, partitions in topics
    ]  # replication factor 1, no assignments, no configs
    f = Fields().array(items).i32(30_000)
    if version >= 1:
        f.bool(validate_only)
    return f


def create_topics(
    conn: KafkaConnection, topics: list[tuple[str, int]], version: int = 2
) -> dict[str, tuple[int, str | None]]:
    """topic -> (error code, error message) of a CreateTopics (v1-v4)."""
    assert 1 <= version <= 4
    r = conn.request(kw.API_CREATE_TOPICS, version, create_topics_body(version, topics))
    if version >= 2:
        r.i32()  # throttle time
    return dict(r.array(lambda x: (x.string(), (x.i16(), x.string()))))


def delete_topics_body(topics: list[str]) -> Fields:
    return Fields().string_array(topics).i32(30_000)


def describe_configs_body(version: int, resources: list[tuple[int, str]], documentation: bool = False) -> Fields:
    """Every config key (null key list) of each resource."""
    items = [Fields().i8(kind).string(name).string_array(None) for kind, name in resources]
    f = Fields().array(items)
    if version >= 1:
        f.bool(False)  # include synonyms
    if version >= 3:
        f.bool(documentation)
    return f


@dataclass
class ConfigResult:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: dict[str, str | None]


def describe_configs(
    conn: KafkaConnection, resources: list[tuple[int, str]], version: int = 1, documentation: bool = False
) -> list[ConfigResult]:
    r = conn.request(kw.API_DESCRIBE_CONFIGS, version, describe_configs_body(version, resources, documentation))
    r.i32()  # throttle time

    def config(x):
        name, value = x.string(), x.string()
        x.i8()  # read only
        x.i8()  # is default (v0) / config source (v1+)
        x.i8()  # is sensitive
        if version >= 1:
            x.array(lambda y: (y.string(), y.string(), y.i8()))  # synonyms
        if version >= 3:
            x.i8()  # config type
            x.string()  # documentation
        return name, value

    def result(x):
        error, message, kind, name = x.i16(), x.string(), x.i8(), x.string()
        return ConfigResult(error, message, kind, name, dict(x.array(config)))

    return r.array(result)


def incremental_alter_configs_body(topic: str, configs: list[tuple[str, str]], version: int = 0) -> Fields:
    """SET of `configs` on `topic`; v1 is flexible."""
    if version >= 1:
        ops = [Fields().compact_string(k).i8(CONFIG_OP_SET).compact_string(v).tagged_fields() for k, v in configs]
        resource = Fields().i8(RESOURCE_TOPIC).compact_string(topic).compact_array(ops).tagged_fields()
        return Fields().compact_array([resource]).bool(False).tagged_fields()
    ops = [Fields().string(k).i8(CONFIG_OP_SET).string(v) for k, v in configs]
    return Fields().array([Fields().i8(RESOURCE_TOPIC).string(topic).array(ops)]).bool(False)


def find_coordinator_body(version: int, key: str) -> Fields:
    f = Fields().string(key)
    return f.i8(0) if version >= 1 else f  # key type: group


def join_group_body(
    version: int,
    group: str,
    member_id: str = "",
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 10_000,
    protocols: list[tuple[str, bytes]] | None = None,
) -> Fields:
    f = Fields().string(group).i32(session_timeout_ms)
    if version >= 1:
        f.i32(rebalance_timeout_ms)
    f.string(member_id)
    if version >= 5:
        f.string(None)  # group instance id
    f.string("consumer")
    protocols = protocols if protocols is not None else [("range", consumer_subscription(["t"]))]
    return f.array([Fields().string(name).nbytes(meta) for name, meta in protocols])


def consumer_subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data."""
    return kw.i16(0) + kw.array([kw.string(t) for t in topics]) + kw.nbytes(None)


@dataclass
class JoinResult:
    error_code: int
    generation_id: int
    protocol_name: str | None
    leader: str | None
    member_id: str | None
    members: list[str]


def join_group(conn: KafkaConnection, group: str, member_id: str = "", version: int = 4, **kwargs) -> JoinResult:
    r = conn.request(kw.API_JOIN_GROUP, version, join_group_body(version, group, member_id, **kwargs))
    if version >= 2:
        r.i32()  # throttle time
    error, generation, protocol, leader, member = r.i16(), r.i32(), r.string(), r.string(), r.string()

    def member_entry(x):
        mid = x.string()
        if version >= 5:
            x.string()  # group instance id
        x.nbytes()  # metadata
        return mid

    return JoinResult(error, generation, protocol, leader, member, r.array(member_entry))


def sync_group_body(
    version: int, group: str, generation: int, member_id: str, assignments: list[tuple[str, bytes]]
) -> Fields:
    f = Fields().string(group).i32(generation).string(member_id)
    if version >= 3:
        f.string(None)
    return f.array([Fields().string(m).nbytes(a) for m, a in assignments])


def heartbeat_body(version: int, group: str, generation: int, member_id: str) -> Fields:
    f = Fields().string(group).i32(generation).string(member_id)
    return f.string(None) if version >= 3 else f


def leave_group_body(version: int, group: str, member_id: str) -> Fields:
    if version >= 3:
        return Fields().string(group).array([Fields().string(member_id).string(None)])
    return Fields().string(group).string(member_id)


def offset_commit_body(version: int, group: str, topic: str, offsets: list[tuple[int, int]]) -> Fields:
    assert 1 <= version <= 9
    if version >= 8:
        parts = [Fields().i32(p).i64(o).i32(-1).compact_string("fuzz").tagged_fields() for p, o in offsets]
        topics = [Fields().compact_string(topic).compact_array(parts).tagged_fields()]
        f = Fields().compact_string(group).i32(-1).compact_string("").compact_string(None)
        return f.compact_array(topics).tagged_fields()
    f = Fields().string(group).i32(-1).string("")  # generation -1, no member: a simple commit
    if version >= 7:
        f.string(None)
    if 2 <= version <= 4:
        f.i64(-1)  # retention time
    parts = []
    for partition, offset in offsets:
        part = Fields().i32(partition).i64(offset)
        if version == 1:
            part.i64(-1)  # commit timestamp (v1 only)
        if version >= 6:
            part.i32(-1)  # committed leader epoch
        parts.append(part.string("fuzz"))
    return f.array([Fields().string(topic).array(parts)])


def offset_fetch_body(group: str, topic: str, partitions: list[int], version: int = 1) -> Fields:
    """OffsetFetch v1-v9 of one group (v9: no member, as a classic consumer asks)."""
    if version <= 5:
        return Fields().string(group).array([Fields().string(topic).i32_array(partitions)])
    topics = [Fields().compact_string(topic).compact_array([Fields().i32(p) for p in partitions]).tagged_fields()]
    if version <= 7:
        f = Fields().compact_string(group).compact_array(topics)
        return (f.bool(False) if version == 7 else f).tagged_fields()
    entry = Fields().compact_string(group)
    if version >= 9:
        entry.compact_string(None).i32(-1)
    entry.compact_array(topics).tagged_fields()
    return Fields().compact_array([entry]).bool(False).tagged_fields()


def list_groups_body(version: int, states: list[str] | None = None, types: list[str] | None = None) -> Fields:
    """ListGroups v0-v5; v4 filters by state, v5 also by type (empty: no filter)."""
    if version < 3:
        return Fields()
    f = Fields()
    if version >= 4:
        f.compact_array([Fields().compact_string(s) for s in states or []])
    if version >= 5:
        f.compact_array([Fields().compact_string(t) for t in types or []])
    return f.tagged_fields()


def consumer_group_heartbeat_body(version: int, group: str, topic: str) -> Fields:
    """A ConsumerGroupHeartbeat join (epoch 0) subscribing to `topic`."""
    f = Fields().compact_string(group).compact_string("").i32(0).compact_string(None).compact_string(None)
    f.i32(30_000).compact_array([Fields().compact_string(topic)])
    if version >= 1:
        f.compact_string(None)  # regex
    return f.compact_string(None).compact_array([]).tagged_fields()


def consumer_group_join(conn: KafkaConnection, group: str, topic: str, version: int = 1) -> tuple[int, str, int]:
    """Joins `group` as a consumer-protocol member subscribed to `topic`: (error code,
    member id, member epoch)."""
    r = conn.request(kw.API_CONSUMER_GROUP_HEARTBEAT, version, consumer_group_heartbeat_body(version, group, topic))
    r.skip_tagged_fields()  # the response header's (flexible: header v1)
    r.i32()  # throttle time
    error = r.i16()
    r.compact_string()  # error message
    member_id = r.compact_string()
    return error, member_id or "", r.i32()


def consumer_group_describe_body(groups: list[str]) -> Fields:
    return Fields().compact_array([Fields().compact_string(g) for g in groups]).bool(True).tagged_fields()


def describe_groups_body(version: int, groups: list[str]) -> Fields:
    f = Fields().string_array(groups)
    return f.bool(False) if version >= 3 else f


def init_producer_id_body(version: int = 0) -> Fields:
    """An idempotent producer's InitProducerId; v2+ flexible, v3+ with no producer id and
    epoch yet (-1, -1)."""
    if version < 2:
        return Fields().string(None).i32(60_000)
    f = Fields().compact_string(None).i32(60_000)
    if version >= 3:
        f.i64(-1).i16(-1)
    return f.tagged_fields()


def api_versions_body(version: int) -> Fields:
    """ApiVersions v0-v5; v3+ name the client software, v5 no cluster or node (KIP-1242)."""
    if version < 3:
        return Fields()
    f = Fields().compact_string("sluice-e2e").compact_string("1.0")
    if version >= 5:
        f.compact_string(None).i32(-1)
    return f.tagged_fields()


@dataclass
class FuzzNames:
    """What the fuzzer's requests name: a scratch topic (existing, with data), a topic for
    DeleteTopics to delete, and a group. None of them holds data another test checks."""

    topic: str
    doomed_topic: str
    group: str


def sample_request(api_key: int, version: int, n: FuzzNames, unique: str) -> Fields:
    """One valid request body of `api_key` at `version` (`unique` keeps JoinGroup from
    joining an earlier send's group). Unknown APIs get an empty body; a version
    the catalog cannot encode gets the nearest layout it can."""
    batch = kw.record_batch([b"fuzz-a", b"fuzz-b"], timestamp_ms=0)
    builders = {
        # v13+ name the topic by id: the nil id, answered UNKNOWN_TOPIC_ID.
        kw.API_PRODUCE: lambda: kw.produce_body(version, {(bytes(16) if version >= 13 else n.topic): [(0, batch)]}),
        # v13+ name the topic by id: the nil id, answered UNKNOWN_TOPIC_ID.
        kw.API_FETCH: lambda: kw.fetch_body(
            max(version, 4), [(bytes(16) if version >= 13 else n.topic, 0, 0)]
        ),
        kw.API_LIST_OFFSETS: lambda: list_offsets_body(max(version, 1), [(n.topic, 0)]),
        kw.API_METADATA: lambda: metadata_body(version, [n.topic]),
        kw.API_OFFSET_COMMIT: lambda: offset_commit_body(min(max(version, 1), 9), n.group, n.topic, [(0, 1)]),
        kw.API_OFFSET_FETCH: lambda: offset_fetch_body(n.group, n.topic, [0], min(max(version, 1), 9)),
        kw.API_FIND_COORDINATOR: lambda: find_coordinator_body(version, n.group),
        # A fresh group per send: a join never waits on another send's member.
        kw.API_JOIN_GROUP: lambda: join_group_body(version, f"{n.group}-{unique}", session_timeout_ms=6_000),
        kw.API_HEARTBEAT: lambda: heartbeat_body(version, n.group, 1, "no-such-member"),
        kw.API_LEAVE_GROUP: lambda: leave_group_body(version, n.group, "no-such-member"),
        kw.API_SYNC_GROUP: lambda: sync_group_body(version, n.group, 1, "no-such-member", [("m", b"\0\0")]),
        kw.API_DESCRIBE_GROUPS: lambda: describe_groups_body(version, [n.group]),
        kw.API_LIST_GROUPS: lambda: list_groups_body(version, ["Stable"], ["classic"]),
        # A group of its own per send: the classic scratch group refuses a consumer member.
        kw.API_CONSUMER_GROUP_HEARTBEAT: lambda: consumer_group_heartbeat_body(
            version, f"{n.group}-kip848-{unique}", n.topic
        ),
        kw.API_CONSUMER_GROUP_DESCRIBE: lambda: consumer_group_describe_body([n.group]),
        kw.API_API_VERSIONS: lambda: api_versions_body(version),
        # The existing scratch topic (TOPIC_ALREADY_EXISTS), and validate_only where the
        # version has it: a mutated partition count must not create a 4,097-partition topic.
        kw.API_CREATE_TOPICS: lambda: create_topics_body(version, [(n.topic, 1)], validate_only=True),
        kw.API_DELETE_TOPICS: lambda: delete_topics_body([n.doomed_topic]),
        kw.API_INIT_PRODUCER_ID: lambda: init_producer_id_body(version),
        kw.API_DESCRIBE_CONFIGS: lambda: describe_configs_body(version, [(RESOURCE_TOPIC, n.topic)]),
        kw.API_DELETE_GROUPS: lambda: Fields().string_array([f"{n.group}-gone"]),
        kw.API_INCREMENTAL_ALTER_CONFIGS: lambda: incremental_alter_configs_body(n.topic, [("retention.ms", "-1")], version),
        kw.API_DESCRIBE_PRODUCERS: lambda: Fields()
        .compact_array([Fields().compact_string(n.topic).compact_array([Fields().i32(0)]).tagged_fields()])
        .tagged_fields(),  # fmt: skip
        **security_requests(n),
        **txn_requests(version, n),
        kw.API_CREATE_PARTITIONS: lambda: create_partitions_body(version, n.topic),
        # AlterReplicaLogDirs to a dir the broker does not have (LOG_DIR_NOT_FOUND).
        34: lambda: (
            Fields()
            .compact_array([Fields().compact_string("/nowhere").compact_array(
                [Fields().compact_string(n.topic).compact_array([Fields().i32(0)]).tagged_fields()]
            ).tagged_fields()])
            .tagged_fields()
            if version >= 2
            else Fields().array([Fields().string("/nowhere").array([Fields().string(n.topic).i32_array([0])])])
        ),
        **cluster_admin_requests(version, n),
        **token_requests(version),
        **telemetry_requests(),
    }
    if kw.is_flexible(api_key, version) and not catalog_flexible(api_key, version):
        values = spec_samples(n, unique).get(api_key)
        if values is not None:
            return kafka_spec.encode(api_key, version, values)
    return builders.get(api_key, Fields)()


def token_requests(version: int) -> dict:
    """Valid delegation token request bodies (v1 classic, v2+ flexible, v3 with an owner);
    answered DELEGATION_TOKEN_AUTH_DISABLED or _REQUEST_NOT_ALLOWED on the fuzz broker."""
    flexible = version >= 2

    def text(f: Fields, s: str | None) -> Fields:
        return f.compact_string(s) if flexible else f.string(s)

    def end(f: Fields) -> Fields:
        return f.tagged_fields() if flexible else f

    def items(f: Fields, entries: list[Fields] | None) -> Fields:
        return f.compact_array(entries) if flexible else f.array(entries)

    def create() -> Fields:
        f = Fields()
        if version >= 3:
            text(text(f, "User"), "fuzz-owner")
        renewer = end(text(text(Fields(), "User"), "fuzz-renewer"))
        return end(items(f, [renewer]).i64(3_600_000))

    def by_hmac(period: int) -> Fields:
        f = Fields()
        f = f.compact_bytes(bytes(64)) if flexible else f.nbytes(bytes(64))
        return end(f.i64(period))

    owner = end(text(text(Fields(), "User"), "fuzz-owner"))
    return {
        38: create,
        39: lambda: by_hmac(3_600_000),
        40: lambda: by_hmac(-1),
        41: lambda: end(items(Fields(), [owner])),
    }


def telemetry_requests() -> dict:
    """Valid client telemetry bodies (KIP-714, v0 flexible): a subscription request for a new
    instance, and a push for an instance nobody subscribed (UNKNOWN_SUBSCRIPTION_ID)."""
    return {
        kw.API_GET_TELEMETRY_SUBSCRIPTIONS: lambda: Fields().uuid().tagged_fields(),
        kw.API_PUSH_TELEMETRY: lambda: Fields()
        .uuid(bytes(range(16)))
        .i32(1)
        .bool(False)
        .i8(0)
        .compact_bytes(b"")
        .tagged_fields(),  # fmt: skip
    }


def catalog_flexible(api_key: int, version: int) -> bool:
    """The flexible versions the hand-written bodies above encode; the others come from the
    specs (`spec_samples`)."""
    return (
        (api_key == kw.API_API_VERSIONS and version >= 3)
        or (api_key == kw.API_PRODUCE and version >= 9)
        or (api_key == kw.API_OFFSET_COMMIT and 8 <= version <= 9)
        or (api_key == kw.API_OFFSET_FETCH and 6 <= version <= 9)
        or (api_key == kw.API_LIST_GROUPS and version >= 3)
        or api_key in (kw.API_CONSUMER_GROUP_HEARTBEAT, kw.API_CONSUMER_GROUP_DESCRIBE)
        or (api_key == kw.API_ADD_PARTITIONS_TO_TXN and version >= 3)
        or (api_key == kw.API_ADD_OFFSETS_TO_TXN and version >= 3)
        or (api_key == 34 and version >= 2)
        or (api_key == kw.API_OFFSET_FOR_LEADER_EPOCH and version >= 4)
        or (api_key == kw.API_METADATA and version >= 9)
        or (
            api_key
            in (kw.API_CREATE_PARTITIONS, kw.API_ELECT_LEADERS, kw.API_DESCRIBE_LOG_DIRS, kw.API_DELETE_RECORDS)
            and version >= 2
        )
        or (api_key == kw.API_ALTER_CONFIGS and version == 2)
        or (api_key == kw.API_DESCRIBE_CLUSTER and version <= 1)
        or (api_key == kw.API_LIST_TRANSACTIONS and version == 0)
        or api_key
        in (
            kw.API_DESCRIBE_USER_SCRAM_CREDENTIALS,
            kw.API_ALTER_USER_SCRAM_CREDENTIALS,
            kw.API_DESCRIBE_PRODUCERS,
            kw.API_DESCRIBE_TRANSACTIONS,
            kw.API_WRITE_TXN_MARKERS,
        )
    )


def spec_samples(n: FuzzNames, unique: str) -> dict[int, dict]:
    """Field values (by the specs' names) of one valid request per API, for the flexible
    versions `kafka_spec` encodes: the same scratch names and harmless choices as the
    hand-written bodies (validate_only, unknown members, the scratch ACL topic)."""
    acl = {
        "ResourceType": 2, "ResourceName": FUZZ_ACL_TOPIC, "ResourcePatternType": 3,
        "Principal": "User:fuzzer", "Host": "*", "Operation": 3, "PermissionType": 3,
    }  # fmt: skip
    return {
        kw.API_FETCH: {
            "ReplicaId": -1, "MaxWaitMs": 0, "MinBytes": 1, "MaxBytes": 1 << 20, "SessionEpoch": -1,
            "Topics": [{"Topic": n.topic, "Partitions": [{"Partition": 0, "FetchOffset": 0, "PartitionMaxBytes": 1 << 20}]}],
        },  # fmt: skip
        kw.API_FIND_COORDINATOR: {"Key": n.group, "KeyType": 0, "CoordinatorKeys": [n.group]},
        kw.API_JOIN_GROUP: {
            "GroupId": f"{n.group}-{unique}", "SessionTimeoutMs": 6_000, "RebalanceTimeoutMs": 10_000,
            "ProtocolType": "consumer", "Reason": "fuzz",
            "Protocols": [{"Name": "range", "Metadata": consumer_subscription(["t"])}],
        },  # fmt: skip
        kw.API_SYNC_GROUP: {
            "GroupId": n.group, "GenerationId": 1, "MemberId": "no-such-member", "ProtocolType": "consumer",
            "ProtocolName": "range", "Assignments": [{"MemberId": "m", "Assignment": b"\0\0"}],
        },  # fmt: skip
        kw.API_HEARTBEAT: {"GroupId": n.group, "GenerationId": 1, "MemberId": "no-such-member"},
        kw.API_LEAVE_GROUP: {"GroupId": n.group, "Members": [{"MemberId": "no-such-member", "Reason": "fuzz"}]},
        kw.API_DESCRIBE_GROUPS: {"Groups": [n.group]},
        kw.API_DELETE_GROUPS: {"GroupsNames": [f"{n.group}-gone"]},
        # v10 name topics by id: the nil id, answered UNKNOWN_TOPIC_ID.
        kw.API_OFFSET_COMMIT: {
            "GroupId": n.group, "GenerationIdOrMemberEpoch": -1, "MemberId": "",
            "Topics": [{"Name": n.topic, "Partitions": [{"PartitionIndex": 0, "CommittedOffset": 1, "CommittedMetadata": "fuzz"}]}],
        },  # fmt: skip
        kw.API_OFFSET_FETCH: {"Groups": [{"GroupId": n.group, "Topics": [{"Name": n.topic, "PartitionIndexes": [0]}]}]},
        kw.API_CREATE_TOPICS: {
            "Topics": [{"Name": n.topic, "NumPartitions": 1, "ReplicationFactor": 1}], "TimeoutMs": 30_000,
            "ValidateOnly": True,
        },  # fmt: skip
        kw.API_DELETE_TOPICS: {"TopicNames": [n.doomed_topic], "Topics": [{"Name": n.doomed_topic}], "TimeoutMs": 30_000},
        kw.API_DESCRIBE_CONFIGS: {"Resources": [{"ResourceType": RESOURCE_TOPIC, "ResourceName": n.topic}]},
        kw.API_SASL_AUTHENTICATE: {"AuthBytes": b"\0fuzz-user\0pw"},
        kw.API_DESCRIBE_ACLS: {
            "ResourceTypeFilter": 1, "ResourceNameFilter": None, "PatternTypeFilter": 1, "PrincipalFilter": None,
            "HostFilter": None, "Operation": 1, "PermissionType": 1,
        },  # fmt: skip
        kw.API_CREATE_ACLS: {"Creations": [acl]},
        kw.API_DELETE_ACLS: {
            "Filters": [{
                "ResourceTypeFilter": 2, "ResourceNameFilter": FUZZ_ACL_TOPIC, "PatternTypeFilter": 3,
                "PrincipalFilter": None, "HostFilter": None, "Operation": 1, "PermissionType": 1,
            }],
        },  # fmt: skip
        kw.API_DESCRIBE_CLIENT_QUOTAS: {"Components": [{"EntityType": "client-id", "MatchType": 2}], "Strict": False},
        kw.API_ALTER_CLIENT_QUOTAS: {
            "Entries": [{
                "Entity": [{"EntityType": "client-id", "EntityName": FUZZ_QUOTA_CLIENT}],
                "Ops": [{"Key": "producer_byte_rate", "Value": 1e9, "Remove": False}],
            }],
            "ValidateOnly": True,
        },  # fmt: skip
        kw.API_INCREMENTAL_ALTER_CONFIGS: {
            "Resources": [{
                "ResourceType": RESOURCE_TOPIC, "ResourceName": n.topic,
                "Configs": [{"Name": "retention.ms", "ConfigOperation": 0, "Value": "-1"}],
            }],
        },  # fmt: skip
        kw.API_DESCRIBE_CLUSTER: {"IncludeClusterAuthorizedOperations": True, "EndpointType": 1},
        kw.API_LIST_TRANSACTIONS: {"DurationFilter": -1, "TransactionalIdPattern": "fuzz-.*"},
        kw.API_DESCRIBE_TOPIC_PARTITIONS: {"Topics": [{"Name": n.topic}], "ResponsePartitionLimit": 2_000},
        kw.API_LIST_CONFIG_RESOURCES: {"ResourceTypes": [2, 4]},
        # DescribeQuorum (55): the metadata quorum's one partition.
        55: {"Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}]},
        # UnregisterBroker (64): a broker id no cluster here has (a single node: refused).
        64: {"BrokerId": 9},
    }


def create_partitions_body(version: int, topic: str) -> Fields:
    """CreatePartitions of `topic` to 2 partitions, validate_only (a mutated count must not
    grow the scratch topic)."""
    if version < 2:
        return Fields().array([Fields().string(topic).i32(2).array(None)]).i32(30_000).bool(True)
    entry = Fields().compact_string(topic).i32(2).compact_array(None).tagged_fields()
    return Fields().compact_array([entry]).i32(30_000).bool(True).tagged_fields()


def cluster_admin_requests(version: int, n: FuzzNames) -> dict:
    """DescribeCluster, ElectLeaders, DeleteRecords (of nothing), DescribeLogDirs and
    OffsetForLeaderEpoch of the scratch topic."""

    def topics() -> Fields:
        if version >= 2:
            return Fields().compact_array([Fields().compact_string(n.topic).compact_array([Fields().i32(0)]).tagged_fields()])
        return Fields().array([Fields().string(n.topic).array([Fields().i32(0)])])

    def elect() -> Fields:
        f = Fields()
        if version >= 1:
            f.i8(0)
        f.extend(topics()).i32(30_000)
        return f.tagged_fields() if version >= 2 else f

    def cluster() -> Fields:
        f = Fields().bool(True)
        if version >= 1:
            f.i8(1)
        return f.tagged_fields()

    def delete_records() -> Fields:
        # Offset 0: moves nothing (a mutated offset may trim the scratch topic, no more).
        if version >= 2:
            part = Fields().i32(0).i64(0).tagged_fields()
            topic = Fields().compact_string(n.topic).compact_array([part]).tagged_fields()
            return Fields().compact_array([topic]).i32(30_000).tagged_fields()
        return Fields().array([Fields().string(n.topic).array([Fields().i32(0).i64(0)])]).i32(30_000)

    def alter_configs() -> Fields:
        # validate_only: even a valid change is not applied.
        if version >= 2:
            config = Fields().compact_string("retention.ms").compact_string("-1").tagged_fields()
            resource = Fields().i8(RESOURCE_TOPIC).compact_string(n.topic).compact_array([config]).tagged_fields()
            return Fields().compact_array([resource]).bool(True).tagged_fields()
        config = Fields().string("retention.ms").string("-1")
        return Fields().array([Fields().i8(RESOURCE_TOPIC).string(n.topic).array([config])]).bool(True)

    def offset_for_leader_epoch() -> Fields:
        # Epoch 0 of partition 0, no current epoch: answered from the epoch cache.
        if version >= 4:
            part = Fields().i32(0).i32(-1).i32(0).tagged_fields()
            topic = Fields().compact_string(n.topic).compact_array([part]).tagged_fields()
            return Fields().i32(-1).compact_array([topic]).tagged_fields()
        part = Fields().i32(0).i32(-1).i32(0)
        f = Fields().i32(-1) if version >= 3 else Fields()
        return f.array([Fields().string(n.topic).array([part])])

    return {
        kw.API_OFFSET_FOR_LEADER_EPOCH: offset_for_leader_epoch,
        kw.API_DELETE_RECORDS: delete_records,
        kw.API_OFFSET_DELETE: lambda: Fields().string(f"{n.group}-gone").array([Fields().string(n.topic).array([Fields().i32(0)])]),
        kw.API_ALTER_CONFIGS: alter_configs,
        kw.API_DESCRIBE_CLUSTER: cluster,
        kw.API_ELECT_LEADERS: elect,
        kw.API_DESCRIBE_LOG_DIRS: lambda: topics().tagged_fields() if version >= 2 else topics(),
    }


# The transactional id the fuzzer's transaction requests name (no test reads it).
FUZZ_TXN_ID = "fuzz-txn-scratch"


def txn_requests(version: int, n: FuzzNames) -> dict:
    """Valid transaction request bodies, for a producer id the broker never handed out (so
    they are refused after decoding) and the scratch topic and group."""
    tid, pid, epoch = FUZZ_TXN_ID, 4_000_000_000, 0
    topics = Fields().array([Fields().string(n.topic).array([Fields().i32(0)])])
    compact_topics = Fields().compact_array(
        [Fields().compact_string(n.topic).compact_array([Fields().i32(0)]).tagged_fields()]
    )

    def add_partitions() -> Fields:
        if version < 3:
            return Fields().string(tid).i64(pid).i16(epoch).extend(topics)
        if version == 3:
            return Fields().compact_string(tid).i64(pid).i16(epoch).extend(compact_topics).tagged_fields()
        txn = Fields().compact_string(tid).i64(pid).i16(epoch).bool(True).extend(compact_topics).tagged_fields()
        return Fields().compact_array([txn]).tagged_fields()

    def offset_commit() -> Fields:
        if version >= 3:  # flexible, with the member fields (KIP-447): none here
            part = Fields().i32(0).i64(1).i32(-1).compact_string("m").tagged_fields()
            # v6+ name the topic by id (KIP-1319): the nil id, answered UNKNOWN_TOPIC_ID.
            name = Fields().uuid(bytes(16)) if version >= 6 else Fields().compact_string(n.topic)
            topic = name.compact_array([part]).tagged_fields()
            head = Fields().compact_string(tid).compact_string(n.group).i64(pid).i16(epoch)
            return head.i32(-1).compact_string("").compact_string(None).compact_array([topic]).tagged_fields()
        part = Fields().i32(0).i64(1)
        if version >= 2:
            part.i32(-1)
        part.string("m")
        return Fields().string(tid).string(n.group).i64(pid).i16(epoch).array([Fields().string(n.topic).array([part])])

    return {
        kw.API_ADD_PARTITIONS_TO_TXN: add_partitions,
        kw.API_ADD_OFFSETS_TO_TXN: lambda: (
            Fields().compact_string(tid).i64(pid).i16(epoch).compact_string(n.group).tagged_fields()
            if version >= 3
            else Fields().string(tid).i64(pid).i16(epoch).string(n.group)
        ),
        kw.API_TXN_OFFSET_COMMIT: offset_commit,
        kw.API_END_TXN: lambda: (
            Fields().compact_string(tid).i64(pid).i16(epoch).bool(False).tagged_fields()
            if version >= 3
            else Fields().string(tid).i64(pid).i16(epoch).bool(False)
        ),
        kw.API_DESCRIBE_TRANSACTIONS: lambda: Fields().compact_array([Fields().compact_string(tid)]).tagged_fields(),
        kw.API_LIST_TRANSACTIONS: lambda: Fields().compact_array([]).compact_array([]).tagged_fields(),
        kw.API_WRITE_TXN_MARKERS: lambda: write_txn_markers_body(pid, epoch, [(n.topic, 0)], commit=False, version=version),
    }


def write_txn_markers_body(
    producer_id: int, epoch: int, partitions: list[tuple[str, int]], commit: bool, version: int = 1
) -> Fields:
    """WriteTxnMarkers v1-v2 (flexible): one marker of `producer_id` for (topic, partition)
    entries (consecutive ones of a topic share a topic entry), coordinator epoch 0; v2's
    transaction version 0 (KIP-1228)."""
    grouped: list[tuple[str, list[int]]] = []
    for topic, partition in partitions:
        if grouped and grouped[-1][0] == topic:
            grouped[-1][1].append(partition)
        else:
            grouped.append((topic, [partition]))
    topics = [Fields().compact_string(t).compact_array([Fields().i32(p) for p in ps]).tagged_fields() for t, ps in grouped]
    marker = Fields().i64(producer_id).i16(epoch).bool(commit).compact_array(topics).i32(0)
    if version >= 2:
        marker.i8(0)
    marker.tagged_fields()
    return Fields().compact_array([marker]).tagged_fields()


# What the security requests name: resources and users no other test reads.
FUZZ_ACL_TOPIC = "fuzz-acl-scratch"
FUZZ_QUOTA_CLIENT = "fuzz-quota-scratch"
FUZZ_USER = "fuzz-user"


def security_requests(n: FuzzNames) -> dict:
    """Valid SASL, ACL, quota and SCRAM-user request bodies (v1 of the ACL APIs, v0 of the
    others; SaslHandshake v0 has v1's layout)."""
    acl = Fields().i8(2).string(FUZZ_ACL_TOPIC).i8(3).string("User:fuzzer").string("*").i8(3).i8(3)
    upsert = (
        Fields().compact_string(FUZZ_USER).i8(1).i32(4096).compact_bytes(b"fuzz-salt").compact_bytes(bytes(32))
        .tagged_fields()
    )  # fmt: skip
    return {
        kw.API_SASL_HANDSHAKE: lambda: Fields().string("PLAIN"),
        kw.API_SASL_AUTHENTICATE: lambda: Fields().nbytes(b"\0fuzz-user\0pw"),
        kw.API_DESCRIBE_ACLS: lambda: Fields().i8(1).string(None).i8(1).string(None).string(None).i8(1).i8(1),
        kw.API_CREATE_ACLS: lambda: Fields().array([acl]),
        kw.API_DELETE_ACLS: lambda: Fields().array(
            [Fields().i8(2).string(FUZZ_ACL_TOPIC).i8(3).string(None).string(None).i8(1).i8(1)]
        ),
        kw.API_DESCRIBE_CLIENT_QUOTAS: lambda: Fields().array([Fields().string("client-id").i8(2).string(None)]).bool(False),
        # validate_only: even a valid quota is not stored.
        kw.API_ALTER_CLIENT_QUOTAS: lambda: Fields()
        .array([
            Fields().array([Fields().string("client-id").string(FUZZ_QUOTA_CLIENT)])
            .array([Fields().string("producer_byte_rate").f64(1e9).bool(False)])
        ])
        .bool(True),  # fmt: skip
        kw.API_DESCRIBE_USER_SCRAM_CREDENTIALS: lambda: Fields()
        .compact_array([Fields().compact_string(FUZZ_USER).tagged_fields()])
        .tagged_fields(),  # fmt: skip
        kw.API_ALTER_USER_SCRAM_CREDENTIALS: lambda: Fields().compact_array([]).compact_array([upsert]).tagged_fields(),
    }
