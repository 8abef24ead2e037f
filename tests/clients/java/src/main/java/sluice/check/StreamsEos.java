package sluice.check;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;

/**
 * A Kafka Streams 4.4.0 application at {@code processing.guarantee=exactly_once_v2} (KIP-447:
 * TxnOffsetCommit v3 with the member id, generation and group instance id), for
 * tests/e2e/test_streams_eos.py. It runs three topologies in one application until it is
 * killed:
 *
 * <pre>
 *   word count       eos-text (line)            -> eos-counts (word -> count)
 *   windowed count   eos-clicks (user -> page)  -> eos-window-counts ("user@windowStart" -> count, 60 s tumbling, 5 min grace)
 *   stream-table join eos-orders (order -> customer) x eos-customers (customer -> name)
 *                                               -> eos-enriched (order -> "customer:name")
 * </pre>
 *
 * Caching is off, so every input record makes exactly one output record: read read_committed,
 * each word's counts are 1, 2, ..., n with nothing repeated or missing, across any number of
 * kill -9s and restarts, if and only if the broker's transactions are exact. The state dir is
 * the caller's: a fresh one makes a restart restore its stores from the changelog topics.
 *
 * <pre>
 *   java -cp ... sluice.check.StreamsEos --bootstrap B --app-id ID --state-dir DIR
 * </pre>
 *
 * Prints "RUNNING" on stdout once the application is RUNNING, then runs until killed.
 */
public final class StreamsEos {
    private StreamsEos() {}

    static Topology topology() {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("eos-text", Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
                .filter((key, word) -> !word.isEmpty())
                .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.as("word-counts"))
                .toStream()
                .to("eos-counts", Produced.with(Serdes.String(), Serdes.Long()));
        builder.stream("eos-clicks", Consumed.with(Serdes.String(), Serdes.String()))
                .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                // The clicks' event times jump across three windows: a grace longer than all
                // three keeps every record (none is dropped as late).
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(60), Duration.ofMinutes(5)))
                .count(Materialized.as("click-counts"))
                .toStream()
                .map((window, count) -> KeyValue.pair(window.key() + "@" + window.window().start(), count))
                .to("eos-window-counts", Produced.with(Serdes.String(), Serdes.Long()));
        KTable<String, String> customers =
                builder.table("eos-customers", Consumed.with(Serdes.String(), Serdes.String()));
        builder.stream("eos-orders", Consumed.with(Serdes.String(), Serdes.String()))
                // Re-keyed by customer, the order id kept as the value for the joiner.
                .map((order, customer) -> KeyValue.pair(customer, order))
                .join(customers, (order, name) -> order + ":" + name)
                .map((customer, joined) -> {
                    String[] parts = joined.split(":", 2);
                    return KeyValue.pair(parts[0], customer + ":" + parts[1]);
                })
                .to("eos-enriched", Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    static Properties config(String bootstrap, String appId, String stateDir) {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        // The join's repartition topic (orders re-keyed by customer) takes the default serdes.
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // A restarted instance rejoins at once rather than waiting out the old member's session.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10_000);
        return props;
    }

    public static void main(String[] argv) throws Exception {
        String bootstrap = null;
        String appId = null;
        String stateDir = null;
        for (int i = 0; i + 1 < argv.length; i += 2) {
            switch (argv[i]) {
                case "--bootstrap" -> bootstrap = argv[i + 1];
                case "--app-id" -> appId = argv[i + 1];
                case "--state-dir" -> stateDir = argv[i + 1];
                default -> throw new IllegalArgumentException("unknown flag " + argv[i]);
            }
        }
        if (bootstrap == null || appId == null || stateDir == null) {
            System.err.println("usage: StreamsEos --bootstrap HOST:PORT --app-id ID --state-dir DIR");
            System.exit(2);
        }
        CountDownLatch running = new CountDownLatch(1);
        KafkaStreams streams = new KafkaStreams(topology(), config(bootstrap, appId, stateDir));
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
            if (now == KafkaStreams.State.ERROR) {
                System.err.println("STREAMS ERROR: the application failed (see the log above)");
                System.exit(3);
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                    .SHUTDOWN_APPLICATION;
        });
        streams.start();
        running.await();
        System.out.println("RUNNING");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
