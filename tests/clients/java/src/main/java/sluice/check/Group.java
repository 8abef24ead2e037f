package sluice.check;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

/**
 * A consumer group of two members of one group protocol (`classic`, or `consumer`: KIP-848's
 * server-side assignment) on a 6-partition topic, committing
 * synchronously after every poll and on revocation (what an at-least-once Java service
 * does): member a joins alone and reads the first `records`; b joins, the partitions split
 * and both read the next `records`; a leaves (close) and b, now owning everything, reads the
 * last `records` from a's commits. Reports each member's assignments, every record each
 * consumed, the group's committed offsets against the log end offsets, and how the
 * AdminClient lists and describes the group while both members are in it.
 */
final class Group {
    static final int PARTITIONS = 6;

    private Group() {}

    static Map<String, Object> run(String bootstrap, String topic, int records, String protocol) throws Exception {
        Clients.createTopic(bootstrap, topic, PARTITIONS);
        String group = topic + "-group";
        Map<String, Object> out = new LinkedHashMap<>();
        List<String> failures = new ArrayList<>();
        AtomicInteger produced = new AtomicInteger();
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, Map.of())) {
            Member a = new Member("a", bootstrap, topic, group, protocol);
            Member b = new Member("b", bootstrap, topic, group, protocol);
            produce(producer, topic, records, produced);
            a.start();
            check(failures, "a owns all partitions and read phase 1",
                    () -> a.owned.size() == PARTITIONS && consumed(a, b) == produced.get());
            b.start();
            check(failures, "a and b split the partitions",
                    () -> a.owned.size() + b.owned.size() == PARTITIONS && !a.owned.isEmpty() && !b.owned.isEmpty()
                            && Collections.disjoint(a.owned, b.owned));
            produce(producer, topic, records, produced);
            check(failures, "a and b read phase 2", () -> consumed(a, b) == produced.get());
            out.put("described_with_two", describe(bootstrap, group));
            a.stop();
            check(failures, "b owns all partitions after a left", () -> b.owned.size() == PARTITIONS);
            produce(producer, topic, records, produced);
            check(failures, "b read phase 3", () -> consumed(a, b) == produced.get());
            b.stop();
            out.put("members", Map.of("a", a.report(), "b", b.report()));
        }
        out.put("produced", produced.get());
        out.put("failures", failures);
        out.put("committed", committedAgainstEnd(bootstrap, topic, group));
        return out;
    }

    private static void produce(KafkaProducer<byte[], byte[]> producer, String topic, int count, AtomicInteger produced)
            throws Exception {
        for (int i = 0; i < count; i++) {
            int n = produced.getAndIncrement();
            producer.send(new ProducerRecord<>(topic, n % PARTITIONS, null, Codecs.utf8("r-" + n)));
        }
        producer.flush();
    }

    private static int consumed(Member a, Member b) {
        return a.consumed.size() + b.consumed.size();
    }

    private static void check(List<String> failures, String what, java.util.function.BooleanSupplier condition)
            throws InterruptedException {
        if (!Clients.waitFor(condition)) {
            failures.add("timed out waiting until " + what);
        }
    }

    /** The group as listGroups (with its type) and describeConsumerGroups show it. */
    private static Map<String, Object> describe(String bootstrap, String group) throws Exception {
        try (Admin admin = Clients.admin(bootstrap)) {
            Map<String, Object> out = new LinkedHashMap<>();
            for (var listed : admin.listGroups().all().get()) {
                if (listed.groupId().equals(group)) {
                    out.put("listed_type", listed.type().map(Enum::name).orElse(null));
                    out.put("listed_state", listed.groupState().map(Enum::name).orElse(null));
                }
            }
            var d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            out.put("type", d.type().name());
            out.put("state", d.groupState().name());
            out.put("assignor", d.partitionAssignor());
            List<Integer> partitions = new ArrayList<>();
            List<Integer> perMember = new ArrayList<>();
            for (var m : d.members()) {
                perMember.add(m.assignment().topicPartitions().size());
                m.assignment().topicPartitions().forEach(tp -> partitions.add(tp.partition()));
            }
            Collections.sort(partitions);
            Collections.sort(perMember);
            out.put("partitions", partitions);
            out.put("partitions_per_member", perMember);
            return out;
        }
    }

    /** partition -> [committed offset, log end offset]. */
    private static Map<String, List<Long>> committedAgainstEnd(String bootstrap, String topic, String group)
            throws Exception {
        try (Admin admin = Clients.admin(bootstrap)) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p = 0; p < PARTITIONS; p++) {
                latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            var ends = admin.listOffsets(latest).all().get();
            Map<String, List<Long>> out = new LinkedHashMap<>();
            for (var end : ends.entrySet()) {
                OffsetAndMetadata c = committed.get(end.getKey());
                out.put(String.valueOf(end.getKey().partition()),
                        List.of(c == null ? -1L : c.offset(), end.getValue().offset()));
            }
            return out;
        }
    }

    /** One group member on its own thread (a KafkaConsumer is single-threaded). */
    private static final class Member implements ConsumerRebalanceListener {
        final String name;
        final Set<Integer> owned = ConcurrentHashMap.newKeySet();
        final List<List<Integer>> assignments = new CopyOnWriteArrayList<>();
        final List<String> consumed = new CopyOnWriteArrayList<>();
        final List<String> errors = new CopyOnWriteArrayList<>();
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final String topic;
        private final Thread thread;
        private volatile boolean running = true;

        Member(String name, String bootstrap, String topic, String group, String protocol) {
            this.name = name;
            this.topic = topic;
            this.consumer = Clients.consumer(bootstrap, Map.of(
                    ConsumerConfig.GROUP_ID_CONFIG, group,
                    ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol,
                    ConsumerConfig.CLIENT_ID_CONFIG, topic + "-" + name));
            this.thread = new Thread(this::loop, "member-" + name);
        }

        void start() {
            thread.start();
        }

        /** Leaves the group: the loop ends and close() sends LeaveGroup. */
        void stop() throws InterruptedException {
            running = false;
            thread.join(Clients.DEADLINE.toMillis());
        }

        private void loop() {
            try (consumer) {
                consumer.subscribe(List.of(topic), this);
                while (running) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Clients.POLL)) {
                        consumed.add(r.partition() + ":" + r.offset() + ":" + new String(r.value()));
                    }
                    try {
                        consumer.commitSync();
                    } catch (RebalanceInProgressException e) {
                        // The next poll rejoins; onPartitionsRevoked commits these positions first.
                    }
                }
            } catch (RuntimeException e) {
                errors.add(e.toString());
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            try {
                consumer.commitSync();
            } finally {
                // Gone whether or not the commit went through (a failed one shows in errors).
                for (TopicPartition tp : partitions) {
                    owned.remove(tp.partition());
                }
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            Set<Integer> now = new TreeSet<>(owned);
            for (TopicPartition tp : partitions) {
                now.add(tp.partition());
            }
            owned.addAll(now);
            assignments.add(new ArrayList<>(now));
        }

        Map<String, Object> report() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("assignments", assignments);
            out.put("consumed", consumed);
            out.put("errors", errors);
            out.put("distinct_consumed", new HashSet<>(consumed).size());
            out.put("name", name);
            return out;
        }
    }
}
