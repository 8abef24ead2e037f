package sluice.check;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;

/**
 * One group.protocol=consumer member reading `records` records across a broker restart the
 * test performs meanwhile: it polls and commits synchronously after every poll (errors while
 * the broker is away are recorded and the loop goes on, as a service's does), prints
 * "committed N" on stdout each time a commit covering N records succeeds (the test restarts
 * the broker once it sees enough), and ends when it has read every record and a commit
 * covering all of them has succeeded (or at the deadline). The broker does not persist membership: after the
 * restart the member is unknown (its commits fail with UNKNOWN_MEMBER_ID), and the client
 * must rejoin at epoch 0 before a commit succeeds again. Reports the committed offsets of
 * its final assignment.
 */
final class RestartSurvivor {
    private RestartSurvivor() {}

    static Map<String, Object> run(String bootstrap, String topic, int records) throws Exception {
        Set<String> distinct = new HashSet<>();
        int reads = 0;
        long committedUpTo = 0;
        long committedTotal = 0;
        List<String> errors = new ArrayList<>();
        long deadline = System.nanoTime() + 2 * Clients.DEADLINE.toNanos();
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, topic + "-group",
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"))) {
            consumer.subscribe(List.of(topic));
            while (!(committedUpTo == records && distinct.size() == records) && System.nanoTime() < deadline) {
                try {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Clients.POLL)) {
                        distinct.add(new String(r.value()));
                        reads++;
                    }
                    consumer.commitSync();
                    // What the commit covered: the positions of the partitions held now.
                    committedUpTo = 0;
                    for (var tp : consumer.assignment()) {
                        committedUpTo += consumer.position(tp);
                    }
                    System.out.println("committed " + distinct.size());
                    System.out.flush();
                } catch (RuntimeException e) {
                    errors.add(e.getClass().getSimpleName());
                }
            }
            for (var offset : consumer.committed(consumer.assignment()).values()) {
                committedTotal += offset == null ? 0 : offset.offset();
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("distinct", distinct.size());
        out.put("reads", reads);
        out.put("errors", errors);
        out.put("committed_total", committedTotal);
        return out;
    }
}
