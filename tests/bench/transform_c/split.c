/*
 * The orders split of tests/bench/transform_bench.py as an external consume-transform-produce
 * loop on librdkafka, at the materialized transform's guarantees: read_committed input, a
 * transactional producer, the consumed positions committed in each transaction
 * (rd_kafka_send_offsets_to_transaction), a commit every COMMIT_INTERVAL_MS.
 *
 *   split BOOTSTRAP SOURCE OUT_MATCHED OUT_OTHERS TRANSACTIONAL_ID GROUP_ID PARTITION:END...
 *
 * An order whose "region" is "eu" (a byte scan for the field, as sluice_sdk::json::Path
 * finds it) goes to OUT_MATCHED, every other to OUT_OTHERS, with its key. The process
 * connects, runs InitProducerId and reads the source's metadata, prints "ready", waits for
 * a line on stdin, then assigns the partitions from offset 0 and runs until each has been
 * consumed up to END (exclusive).
 * It prints one JSON line: records consumed and produced per output, transactions, the
 * seconds from the go line to the last commit, and this process's CPU seconds (every
 * thread) over them. Any error ends it with status 1 and the error on stderr.
 *
 *   cc -O2 -Wall -Wextra -o split split.c -lrdkafka
 */
#define _GNU_SOURCE /* memmem */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define COMMIT_INTERVAL_MS 100
#define BATCH_RECORDS 500
#define POLL_TIMEOUT_MS 50
#define TXN_TIMEOUT_MS 60000
#define PARTITIONS_MAX 64

static const char FIELD[] = "\"region\"";
static const char MATCH[] = "\"eu\"";

static void die(const char *what, const char *why) {
    fprintf(stderr, "split: %s: %s\n", what, why);
    exit(1);
}

static void check_txn(const char *what, rd_kafka_error_t *error) {
    if (error) {
        fprintf(stderr, "split: %s: %s (%s)\n", what, rd_kafka_error_string(error),
                rd_kafka_error_txn_requires_abort(error) ? "abortable" : "fatal or retriable");
        exit(1);
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void set(rd_kafka_conf_t *conf, const char *key, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, key, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        die(key, err);
}

/* Whether the JSON object in `v` has "region": "eu": the first occurrence of the field name
 * followed (after blanks) by a colon, then the value compared as written. */
static int matches(const char *v, size_t len) {
    const char *end = v + len, *p = v;
    while ((p = memmem(p, (size_t)(end - p), FIELD, sizeof FIELD - 1)) != NULL) {
        const char *q = p + sizeof FIELD - 1;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q < end && *q == ':') {
            q++;
            while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
                q++;
            return (size_t)(end - q) >= sizeof MATCH - 1 && memcmp(q, MATCH, sizeof MATCH - 1) == 0;
        }
        p += 1;
    }
    return 0;
}

static rd_kafka_t *client(rd_kafka_type_t type, rd_kafka_conf_t *conf) {
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new", err);
    return rk;
}

static void produce(rd_kafka_t *producer, rd_kafka_topic_t *topic, const rd_kafka_message_t *m) {
    for (;;) {
        rd_kafka_resp_err_t err = rd_kafka_producev(
            producer, RD_KAFKA_V_RKT(topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(m->key, m->key_len), RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return;
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            die("rd_kafka_producev", rd_kafka_err2str(err));
        rd_kafka_poll(producer, 10);
    }
}

/* Sends the consumer's positions to the open transaction and commits it. */
static void commit(rd_kafka_t *producer, rd_kafka_t *consumer, const rd_kafka_topic_partition_list_t *assigned,
                   rd_kafka_consumer_group_metadata_t *group) {
    rd_kafka_topic_partition_list_t *positions = rd_kafka_topic_partition_list_copy(assigned);
    rd_kafka_resp_err_t err = rd_kafka_position(consumer, positions);
    if (err)
        die("rd_kafka_position", rd_kafka_err2str(err));
    check_txn("send_offsets_to_transaction",
              rd_kafka_send_offsets_to_transaction(producer, positions, group, TXN_TIMEOUT_MS));
    rd_kafka_topic_partition_list_destroy(positions);
    check_txn("commit_transaction", rd_kafka_commit_transaction(producer, TXN_TIMEOUT_MS));
}

int main(int argc, char **argv) {
    if (argc < 8 || argc - 7 > PARTITIONS_MAX) {
        fprintf(stderr, "usage: split BOOTSTRAP SOURCE OUT_MATCHED OUT_OTHERS TRANSACTIONAL_ID GROUP_ID "
                        "PARTITION:END... (at most %d)\n", PARTITIONS_MAX);
        return 2;
    }
    const char *bootstrap = argv[1], *source = argv[2];
    int parts = argc - 7;
    int32_t partition[PARTITIONS_MAX];
    int64_t end[PARTITIONS_MAX], next[PARTITIONS_MAX];
    for (int i = 0; i < parts; i++) {
        long long e;
        if (sscanf(argv[7 + i], "%d:%lld", &partition[i], &e) != 2)
            die("PARTITION:END", argv[7 + i]);
        end[i] = e;
        next[i] = 0;
    }

    rd_kafka_conf_t *cconf = rd_kafka_conf_new();
    set(cconf, "bootstrap.servers", bootstrap);
    set(cconf, "group.id", argv[6]);
    set(cconf, "isolation.level", "read_committed");
    set(cconf, "enable.auto.commit", "false");
    set(cconf, "auto.offset.reset", "earliest");
    rd_kafka_t *consumer = client(RD_KAFKA_CONSUMER, cconf);
    rd_kafka_poll_set_consumer(consumer);

    rd_kafka_conf_t *pconf = rd_kafka_conf_new();
    set(pconf, "bootstrap.servers", bootstrap);
    set(pconf, "transactional.id", argv[5]);
    set(pconf, "partitioner", "murmur2_random");
    rd_kafka_t *producer = client(RD_KAFKA_PRODUCER, pconf);
    rd_kafka_topic_t *out[2] = {rd_kafka_topic_new(producer, argv[3], NULL), rd_kafka_topic_new(producer, argv[4], NULL)};
    if (!out[0] || !out[1])
        die("rd_kafka_topic_new", rd_kafka_err2str(rd_kafka_last_error()));
    check_txn("init_transactions", rd_kafka_init_transactions(producer, TXN_TIMEOUT_MS));
    rd_kafka_consumer_group_metadata_t *group = rd_kafka_consumer_group_metadata(consumer);
    /* The source's metadata now: an assign() of a topic the consumer has not seen waits for
     * its next metadata refresh (up to a second) before the first fetch. */
    rd_kafka_topic_t *source_topic = rd_kafka_topic_new(consumer, source, NULL);
    const struct rd_kafka_metadata *metadata;
    if (!source_topic)
        die("rd_kafka_topic_new", rd_kafka_err2str(rd_kafka_last_error()));
    rd_kafka_resp_err_t err = rd_kafka_metadata(consumer, 0, source_topic, &metadata, TXN_TIMEOUT_MS);
    if (err)
        die("rd_kafka_metadata", rd_kafka_err2str(err));
    rd_kafka_metadata_destroy(metadata);

    char line[64];
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        die("stdin", "closed before the go line");
    double t0 = now_s(), cpu0 = cpu_s();

    rd_kafka_topic_partition_list_t *assigned = rd_kafka_topic_partition_list_new(parts);
    for (int i = 0; i < parts; i++)
        rd_kafka_topic_partition_list_add(assigned, source, partition[i])->offset = 0;
    err = rd_kafka_assign(consumer, assigned);
    if (err)
        die("rd_kafka_assign", rd_kafka_err2str(err));
    rd_kafka_queue_t *queue = rd_kafka_queue_get_consumer(consumer);

    long long consumed = 0, produced[2] = {0, 0}, txns = 0, in_txn = 0;
    int open = parts;
    for (int i = 0; i < parts; i++)
        open -= end[i] <= 0;
    rd_kafka_message_t *batch[BATCH_RECORDS];
    check_txn("begin_transaction", rd_kafka_begin_transaction(producer));
    double txn_start = now_s();
    while (open > 0) {
        ssize_t n = rd_kafka_consume_batch_queue(queue, POLL_TIMEOUT_MS, batch, BATCH_RECORDS);
        if (n < 0)
            die("rd_kafka_consume_batch_queue", rd_kafka_err2str(rd_kafka_last_error()));
        for (ssize_t j = 0; j < n; j++) {
            rd_kafka_message_t *m = batch[j];
            if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    die("consume", rd_kafka_message_errstr(m));
            } else {
                int eu = m->payload && matches(m->payload, m->len);
                produce(producer, out[eu ? 0 : 1], m);
                produced[eu ? 0 : 1]++;
                consumed++;
                in_txn++;
                for (int i = 0; i < parts; i++) {
                    if (partition[i] == m->partition) {
                        if (next[i] < end[i] && m->offset + 1 >= end[i])
                            open--;
                        next[i] = m->offset + 1;
                    }
                }
            }
            rd_kafka_message_destroy(m);
        }
        rd_kafka_poll(producer, 0);
        if (in_txn > 0 && (open == 0 || (now_s() - txn_start) * 1e3 >= COMMIT_INTERVAL_MS)) {
            commit(producer, consumer, assigned, group);
            txns++;
            in_txn = 0;
            if (open > 0) {
                check_txn("begin_transaction", rd_kafka_begin_transaction(producer));
                txn_start = now_s();
            }
        }
    }
    double elapsed = now_s() - t0, cpu = cpu_s() - cpu0;
    printf("{\"consumed\": %lld, \"produced\": [%lld, %lld], \"transactions\": %lld, \"elapsed_s\": %.6f, "
           "\"cpu_s\": %.6f}\n",
           consumed, produced[0], produced[1], txns, elapsed, cpu);
    fflush(stdout);

    rd_kafka_queue_destroy(queue);
    rd_kafka_topic_partition_list_destroy(assigned);
    rd_kafka_topic_destroy(source_topic);
    rd_kafka_consumer_group_metadata_destroy(group);
    rd_kafka_consumer_close(consumer);
    rd_kafka_destroy(consumer);
    rd_kafka_topic_destroy(out[0]);
    rd_kafka_topic_destroy(out[1]);
    rd_kafka_destroy(producer);
    return 0;
}
