package sluice.check;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The AdminClient calls a Java service or operator tool makes, in order, each result
 * reported: createTopics (with configs, and again for an existing name), listTopics,
 * describeCluster, describeTopics, createPartitions, describeConfigs (topic and broker),
 * incrementalAlterConfigs (SET and DELETE), deleteRecords, listOffsets (earliest, latest, and by
 * max timestamp, KIP-734, with earliest local and latest tiered), listGroups,
 * describeConsumerGroups (a live member, then empty), listConsumerGroupOffsets,
 * listConfigResources (topics and brokers), deleteTopics.
 */
final class AdminCalls {
    static final int RECORDS = 10;
    static final long DELETE_BEFORE = 4;

    private AdminCalls() {}

    static Map<String, Object> run(String bootstrap, String topic) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        String other = topic + "-other";
        try (Admin admin = Clients.admin(bootstrap)) {
            NewTopic created = new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
            admin.createTopics(List.of(created, new NewTopic(other, 1, (short) 1))).all().get();
            out.put("create_existing_error", errorOf(() -> admin.createTopics(List.of(created)).all().get()));
            out.put("list_topics", new ArrayList<>(admin.listTopics().names().get()));
            out.put("cluster_nodes", admin.describeCluster().nodes().get().size());
            out.put("describe_topic", describe(admin, topic));
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all().get();
            out.put("partitions_after_create_partitions", describeTopic(admin, topic).partitions().size());
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            out.put("topic_configs_created", configs(admin, resource));
            String brokerId = String.valueOf(admin.describeCluster().controller().get().id());
            out.put("broker_configs", configs(admin, new ConfigResource(ConfigResource.Type.BROKER, brokerId)));
            admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "500000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE))))
                    .all().get();
            out.put("topic_configs_altered", configs(admin, resource));
            out.putAll(deleteRecords(admin, bootstrap, topic));
            out.putAll(groups(admin, bootstrap, topic));
            out.putAll(maxTimestamp(admin, bootstrap, topic));
            out.put("config_resources", admin.listConfigResources(
                    java.util.Set.of(ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER),
                    new org.apache.kafka.clients.admin.ListConfigResourcesOptions())
                    .all().get().stream().map(r -> r.type() + ":" + r.name()).sorted().toList());
            admin.deleteTopics(List.of(other)).all().get();
            out.put("list_topics_after_delete", new ArrayList<>(admin.listTopics().names().get()));
        }
        return out;
    }

    private static TopicDescription describeTopic(Admin admin, String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
    }

    private static Map<String, Object> describe(Admin admin, String topic) throws Exception {
        TopicDescription d = describeTopic(admin, topic);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", d.name());
        out.put("internal", d.isInternal());
        out.put("partitions", d.partitions().size());
        out.put("leaders", d.partitions().stream().map(p -> p.leader().id()).toList());
        out.put("replicas", d.partitions().stream().map(p -> p.replicas().size()).toList());
        out.put("isr", d.partitions().stream().map(p -> p.isr().size()).toList());
        return out;
    }

    /** name -> {value, source}; a sensitive or null value is reported as null. */
    private static Map<String, Map<String, String>> configs(Admin admin, ConfigResource resource) throws Exception {
        Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
        Map<String, Map<String, String>> out = new TreeMap<>();
        for (ConfigEntry e : config.entries()) {
            Map<String, String> entry = new LinkedHashMap<>();
            entry.put("value", e.value());
            entry.put("source", e.source().name());
            out.put(e.name(), entry);
        }
        return out;
    }

    private static Map<String, Object> deleteRecords(Admin admin, String bootstrap, String topic) throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0);
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, Map.of())) {
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, Codecs.utf8("v-" + i)));
            }
            producer.flush();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("delete_records_low_watermark", admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(DELETE_BEFORE)))
                .lowWatermarks().get(p0).get().lowWatermark());
        out.put("earliest_after_delete", admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).partitionResult(p0).get().offset());
        out.put("latest_after_delete", admin.listOffsets(Map.of(p0, OffsetSpec.latest())).partitionResult(p0).get().offset());
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of())) {
            out.put("first_offset_read_after_delete",
                    Clients.readFromStart(consumer, List.of(p0), 1).stream().map(r -> r.offset()).findFirst().orElse(-1L));
        }
        return out;
    }

    /**
     * OffsetSpec.maxTimestamp() (ListOffsets v7+, KIP-734) on partition 1, whose records carry
     * out-of-order timestamps: the first record with the largest one; earliestLocal() (v8) and
     * latestTiered() (v9) as a broker without tiered storage answers them.
     */
    private static Map<String, Object> maxTimestamp(Admin admin, String bootstrap, String topic) throws Exception {
        TopicPartition p1 = new TopicPartition(topic, 1);
        long base = System.currentTimeMillis() - 60_000;
        long[] deltas = {10, 900, 20, 900, 30};
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, Map.of())) {
            for (int i = 0; i < deltas.length; i++) {
                producer.send(new ProducerRecord<>(topic, 1, base + deltas[i], null, Codecs.utf8("t-" + i)));
            }
            producer.flush();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        var max = admin.listOffsets(Map.of(p1, OffsetSpec.maxTimestamp())).partitionResult(p1).get();
        out.put("max_timestamp_offset", max.offset());
        out.put("max_timestamp_delta", max.timestamp() - base);
        out.put("earliest_local", admin.listOffsets(Map.of(p1, OffsetSpec.earliestLocal())).partitionResult(p1).get().offset());
        out.put("latest_tiered", admin.listOffsets(Map.of(p1, OffsetSpec.latestTiered())).partitionResult(p1).get().offset());
        return out;
    }

    /** A subscribed member commits offsets; the group is described while it is live and after it left. */
    private static Map<String, Object> groups(Admin admin, String bootstrap, String topic) throws Exception {
        String group = topic + "-group";
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, group, ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"))) {
            consumer.subscribe(List.of(topic));
            int[] read = {0};
            boolean gotAll = Clients.waitFor(() -> {
                read[0] += consumer.poll(Clients.POLL).count();
                return read[0] >= RECORDS - DELETE_BEFORE;
            });
            out.put("group_member_read", gotAll ? read[0] : -1);
            consumer.commitSync();
            out.put("list_groups_live", listGroups(admin));
            out.put("describe_group_live", describeGroup(admin, group));
        }
        out.put("describe_group_after_close", describeGroup(admin, group));
        Map<String, Long> committed = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                .forEach((tp, o) -> committed.put(tp.toString(), o.offset()));
        out.put("group_offsets", committed);
        return out;
    }

    private static Map<String, String> listGroups(Admin admin) throws Exception {
        Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forConsumerGroups()).all().get();
        Map<String, String> out = new TreeMap<>();
        for (GroupListing g : listed) {
            out.put(g.groupId(), g.groupState().map(Enum::name).orElse("?") + "/" + g.type().map(Enum::name).orElse("?"));
        }
        return out;
    }

    private static Map<String, Object> describeGroup(Admin admin, String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("state", d.groupState().name());
        out.put("type", d.type().name());
        out.put("assignor", d.partitionAssignor());
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            members.add(Map.of("client_id", m.clientId(),
                    "partitions", m.assignment().topicPartitions().stream().map(TopicPartition::toString).sorted().toList()));
        }
        out.put("members", members);
        return out;
    }

    /** The class of the exception `call` ends with (unwrapped from ExecutionException), or null. */
    private static String errorOf(Call call) {
        try {
            call.run();
            return null;
        } catch (ExecutionException e) {
            return e.getCause().getClass().getSimpleName();
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    @FunctionalInterface
    private interface Call {
        void run() throws Exception;
    }
}
