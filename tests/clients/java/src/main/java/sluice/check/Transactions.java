package sluice.check;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;

/**
 * A transactional producer (transactional.id) commits a transaction, aborts one, and commits
 * one that also carries a consumer group's offsets (sendOffsetsToTransaction, as
 * consume-transform-produce does); offsets sent with the group metadata of a member the group
 * does not know are refused (KIP-447) and that transaction aborted; read_committed and
 * read_uncommitted consumers report what they see. Then a second producer with the same
 * transactional.id fences the first.
 */
final class Transactions {
    static final int PER_TXN = 5;

    private Transactions() {}

    static Map<String, Object> run(String bootstrap, String topic) throws Exception {
        Clients.createTopic(bootstrap, topic, 1);
        String txnId = topic + "-txn";
        String group = topic + "-group";
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> out = new LinkedHashMap<>();
        KafkaProducer<byte[], byte[]> first = Clients.producer(bootstrap, Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId));
        first.initTransactions();
        transaction(first, topic, "committed-1", null, null);
        first.beginTransaction();
        send(first, topic, "aborted");
        // abortTransaction drops batches not yet sent: flush so the aborted records reach the
        // log and read_committed has something to skip.
        first.flush();
        first.abortTransaction();
        transaction(first, topic, "committed-2", Map.of(tp, new OffsetAndMetadata(3)), groupMetadata(bootstrap, group));
        out.put("ghost_member_offsets_error", ghostOffsets(first, bootstrap, tp, group));

        KafkaProducer<byte[], byte[]> second = Clients.producer(bootstrap, Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId));
        second.initTransactions();
        String fenced = null;
        try {
            transaction(first, topic, "zombie", null, null);
        } catch (ProducerFencedException e) {
            fenced = e.getClass().getSimpleName();
        } catch (KafkaException e) {
            // Transaction protocol v2 (KIP-890 part 2): no AddPartitionsToTxn tells the zombie
            // first; its produce is refused INVALID_PRODUCER_EPOCH (abortable), and the abort
            // that follows is fenced by EndTxn.
            fenced = e.getClass().getSimpleName() + " caused by " + (e.getCause() == null ? null : e.getCause().getClass().getSimpleName());
            try {
                first.abortTransaction();
                fenced += ", then the abort succeeded";
            } catch (KafkaException abort) {
                fenced += ", then " + abort.getClass().getSimpleName();
            }
        }
        first.close();
        out.put("zombie_commit_error", fenced);
        transaction(second, topic, "committed-3", null, null);
        second.close();

        out.put("read_committed", values(bootstrap, tp, "read_committed", 3 * PER_TXN));
        out.put("read_uncommitted", values(bootstrap, tp, "read_uncommitted", 4 * PER_TXN));
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            OffsetAndMetadata committed = consumer.committed(Set.of(tp)).get(tp);
            out.put("offset_committed_in_txn", committed == null ? -1 : committed.offset());
            out.put("end_offset", consumer.endOffsets(List.of(tp)).get(tp));
        }
        return out;
    }

    private static void transaction(KafkaProducer<byte[], byte[]> producer, String topic, String label,
            Map<TopicPartition, OffsetAndMetadata> offsets, ConsumerGroupMetadata group) {
        producer.beginTransaction();
        send(producer, topic, label);
        if (offsets != null) {
            producer.sendOffsetsToTransaction(offsets, group);
        }
        producer.commitTransaction();
    }

    /**
     * KIP-447's zombie check: a member joins a group (a generation, a member id), leaves, and
     * offsets sent with its group metadata (TxnOffsetCommit v3+) are refused
     * (UNKNOWN_MEMBER_ID: the client's CommitFailedException, an abortable error); the
     * transaction is aborted and the producer goes on. The error's class name.
     */
    private static String ghostOffsets(KafkaProducer<byte[], byte[]> producer, String bootstrap, TopicPartition tp,
            String group) {
        ConsumerGroupMetadata ghost;
        try (KafkaConsumer<byte[], byte[]> member = Clients.consumer(bootstrap, Map.of(ConsumerConfig.GROUP_ID_CONFIG, group + "-eos"))) {
            member.subscribe(List.of(tp.topic()));
            long deadline = System.currentTimeMillis() + 30_000;
            while (member.assignment().isEmpty() && System.currentTimeMillis() < deadline) {
                member.poll(java.time.Duration.ofMillis(100));
            }
            ghost = member.groupMetadata();
        }
        producer.beginTransaction();
        String error = null;
        try {
            producer.sendOffsetsToTransaction(Map.of(tp, new OffsetAndMetadata(99)), ghost);
            producer.commitTransaction();
        } catch (KafkaException e) {
            error = e.getClass().getSimpleName();
            producer.abortTransaction();
        }
        return error;
    }

    /** The metadata of a group member that assigned itself its partitions (no generation),
     * as a consume-transform-produce loop over assign() passes it. */
    private static ConsumerGroupMetadata groupMetadata(String bootstrap, String group) {
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
            return consumer.groupMetadata();
        }
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, String label) {
        for (int i = 0; i < PER_TXN; i++) {
            producer.send(new ProducerRecord<>(topic, 0, null, Codecs.utf8(label + "-" + i)));
        }
    }

    /** The values `isolation` reads from the start, polling until `expected` arrived (or the deadline). */
    private static List<String> values(String bootstrap, TopicPartition tp, String isolation, int expected) {
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap,
                Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation))) {
            for (ConsumerRecord<byte[], byte[]> r : Clients.readFromStart(consumer, List.of(tp), expected)) {
                out.add(new String(r.value()));
            }
        }
        return out;
    }
}
