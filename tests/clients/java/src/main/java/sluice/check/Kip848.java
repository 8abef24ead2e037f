package sluice.check;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;

/**
 * A consumer with group.protocol=consumer (KIP-848), which needs ConsumerGroupHeartbeat.
 * Sluice does not advertise that API yet, so the consumer should fail from poll() rather than
 * wait for an assignment forever: reports the exception poll() threw (class, message), or
 * null when none came before the deadline, and how many records it read.
 */
final class Kip848 {
    private Kip848() {}

    static Map<String, Object> run(String bootstrap, String topic) throws Exception {
        Clients.createTopic(bootstrap, topic, 1);
        Map<String, Object> out = new LinkedHashMap<>();
        int[] read = {0};
        String[] error = {null, null};
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of(
                ConsumerConfig.GROUP_ID_CONFIG, topic + "-group",
                ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"))) {
            consumer.subscribe(List.of(topic));
            Clients.waitFor(() -> {
                try {
                    read[0] += consumer.poll(Clients.POLL).count();
                    return false;
                } catch (RuntimeException e) {
                    error[0] = e.getClass().getName();
                    error[1] = e.getMessage();
                    return true;
                }
            });
        }
        out.put("error_class", error[0]);
        out.put("error_message", error[1]);
        out.put("records_read", read[0]);
        return out;
    }
}
