package sluice.check;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * One topic per codec (`T-none`, `T-gzip`, ...; one partition, so the test can fetch it raw to
 * see the codec was used): `records` records of every field shape, sent with acks=all and
 * idempotence, then read back from the start and compared byte for byte.
 */
final class Codecs {
    static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");

    private Codecs() {}

    static Map<String, Object> run(String bootstrap, String topic, int records) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String codec : CODECS) {
            out.put(codec, roundTrip(bootstrap, topic + "-" + codec, codec, records));
        }
        return out;
    }

    private static Map<String, Object> roundTrip(String bootstrap, String topic, String codec, int count)
            throws Exception {
        Clients.createTopic(bootstrap, topic, 1);
        List<ProducerRecord<byte[], byte[]>> sent = sample(topic, count);
        List<Long> offsets = new ArrayList<>();
        // linger.ms lets batches of many records form, so the codec has something to compress.
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(
                bootstrap, Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec, ProducerConfig.LINGER_MS_CONFIG, 20))) {
            List<Future<RecordMetadata>> acks = new ArrayList<>();
            for (ProducerRecord<byte[], byte[]> r : sent) {
                acks.add(producer.send(r));
            }
            producer.flush();
            for (Future<RecordMetadata> ack : acks) {
                offsets.add(ack.get().offset());
            }
        }
        List<ConsumerRecord<byte[], byte[]>> got;
        try (KafkaConsumer<byte[], byte[]> consumer = Clients.consumer(bootstrap, Map.of())) {
            got = Clients.readFromStart(consumer, List.of(new TopicPartition(topic, 0)), count);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("sent", sent.size());
        result.put("acked_offsets_contiguous", offsets.equals(range(count)));
        result.put("consumed", got.size());
        result.put("mismatches", mismatches(sent, got));
        return result;
    }

    /** Null, empty and plain keys; null, empty, random and compressible values; headers with
     * duplicate names, a null value and an empty value; explicit CreateTimes. */
    static List<ProducerRecord<byte[], byte[]>> sample(String topic, int count) {
        Random random = new Random(count);
        long baseTimestampMs = System.currentTimeMillis() - 3_600_000;
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int kind = i % 6;
            byte[] key = kind == 0 ? null : kind == 1 ? new byte[0] : utf8("key-" + i);
            byte[] value;
            if (kind == 2) {
                value = null;
            } else if (kind == 3) {
                value = new byte[0];
            } else if (kind == 4) {
                value = new byte[50 + i % 400];
                random.nextBytes(value);
            } else {
                value = utf8(("compressible payload " + i % 7 + " ").repeat(1 + i % 40));
            }
            List<Header> headers = new ArrayList<>();
            if (i % 3 == 0) {
                headers.add(new RecordHeader("trace", utf8("t-" + i)));
                headers.add(new RecordHeader("dup", utf8("1")));
                headers.add(new RecordHeader("dup", utf8("2")));
                headers.add(new RecordHeader("nullhdr", null));
                headers.add(new RecordHeader("empty", new byte[0]));
            }
            out.add(new ProducerRecord<>(topic, 0, baseTimestampMs + i * 13L, key, value, headers));
        }
        return out;
    }

    /** Up to 10 descriptions of records that differ, in order; empty when all are the same. */
    private static List<String> mismatches(List<ProducerRecord<byte[], byte[]>> sent, List<ConsumerRecord<byte[], byte[]>> got) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < Math.min(sent.size(), got.size()) && out.size() < 10; i++) {
            ProducerRecord<byte[], byte[]> s = sent.get(i);
            ConsumerRecord<byte[], byte[]> g = got.get(i);
            List<String> fields = new ArrayList<>();
            if (g.offset() != i) {
                fields.add("offset " + g.offset());
            }
            if (!Arrays.equals(s.key(), g.key())) {
                fields.add("key");
            }
            if (!Arrays.equals(s.value(), g.value())) {
                fields.add("value");
            }
            if (!sameHeaders(s.headers().toArray(), g.headers().toArray())) {
                fields.add("headers");
            }
            if (s.timestamp() != g.timestamp()) {
                fields.add("timestamp " + g.timestamp() + " != " + s.timestamp());
            }
            if (!fields.isEmpty()) {
                out.add("record " + i + ": " + String.join(", ", fields));
            }
        }
        return out;
    }

    private static boolean sameHeaders(Header[] a, Header[] b) {
        if (a.length != b.length) {
            return false;
        }
        for (int i = 0; i < a.length; i++) {
            if (!a[i].key().equals(b[i].key()) || !Arrays.equals(a[i].value(), b[i].value())) {
                return false;
            }
        }
        return true;
    }

    private static List<Long> range(int count) {
        List<Long> out = new ArrayList<>();
        for (long i = 0; i < count; i++) {
            out.add(i);
        }
        return out;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
