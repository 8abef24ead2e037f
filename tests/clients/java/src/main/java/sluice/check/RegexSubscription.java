package sluice.check;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * A group.protocol=consumer member subscribing with a SubscriptionPattern (KIP-848's
 * broker-side RE2 regex) `T-[ab]`: it reads `T-a`, never `T-c`, and picks up `T-b` when that
 * topic is created after the subscription. Reports the records read per topic and the
 * final assignment.
 */
final class RegexSubscription {
    static final int RECORDS = 20;

    private RegexSubscription() {}

    static Map<String, Object> run(String bootstrap, String topic) throws Exception {
        Clients.createTopic(bootstrap, topic + "-a", 2);
        Clients.createTopic(bootstrap, topic + "-c", 1);
        Map<String, Integer> read = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(bootstrap, Map.of());
                KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of(
                        ConsumerConfig.GROUP_ID_CONFIG, topic + "-group",
                        ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"))) {
            consumer.subscribe(new SubscriptionPattern(topic.replace(".", "\\.") + "-[ab]"));
            for (String suffix : List.of("-a", "-c")) {
                for (int i = 0; i < RECORDS; i++) {
                    producer.send(new ProducerRecord<>(topic + suffix, Codecs.utf8("r-" + i)));
                }
            }
            producer.flush();
            Clients.waitFor(() -> poll(consumer, read) && read.getOrDefault(topic + "-a", 0) == RECORDS);
            Clients.createTopic(bootstrap, topic + "-b", 1);
            for (int i = 0; i < RECORDS; i++) {
                producer.send(new ProducerRecord<>(topic + "-b", Codecs.utf8("r-" + i)));
            }
            producer.flush();
            Clients.waitFor(() -> poll(consumer, read) && read.getOrDefault(topic + "-b", 0) == RECORDS);
            consumer.commitSync();
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("read", read);
            out.put("assigned", consumer.assignment().stream().map(Object::toString).sorted().toList());
            return out;
        }
    }

    private static boolean poll(KafkaConsumer<byte[], byte[]> consumer, Map<String, Integer> read) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Clients.POLL)) {
            read.merge(r.topic(), 1, Integer::sum);
        }
        return true;
    }
}
