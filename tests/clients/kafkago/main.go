// Command kafkago-check drives Sluice with segmentio/kafka-go the way Go services use it.
// Each subcommand runs one scenario and prints one JSON object {"result": ..., "error": ...}
// on stdout; the caller (tests/e2e/test_kafka_go.py) asserts on it.
//
//	kafkago-check codecs -bootstrap B -spec FILE   produce a spec's records with a Writer per
//	                                                codec (acks=all), read them back with a
//	                                                partition Reader
//	kafkago-check group  -bootstrap B -topic T -group G -per-phase N
//	                                                ConsumerGroup members: join, rebalance, leave
//	kafkago-check reader -bootstrap B -topic T -group G -per-phase N -second M
//	                                                a Reader with a GroupID reads N records,
//	                                                another reads the next M from the commits
//	kafkago-check admin  -bootstrap B -topic T -group G
//	                                                kafka.Client topic, config, offset, group calls
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// Header, SpecRecord, SpecPartition and Spec are the records the caller asks for: JSON with
// base64 bytes (encoding/json's []byte form), null for a null key.
type Header struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

type SpecRecord struct {
	Key     []byte   `json:"key"`
	Value   []byte   `json:"value"`
	Headers []Header `json:"headers"`
}

type SpecPartition struct {
	Partition int          `json:"partition"`
	Codec     string       `json:"codec"`
	Records   []SpecRecord `json:"records"`
}

type Spec struct {
	Topic      string          `json:"topic"`
	Partitions []SpecPartition `json:"partitions"`
}

// Placed is where a Writer's Completion said a record went.
type Placed struct {
	Partition int   `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Consumed is one record as a Reader returned it.
type Consumed struct {
	Partition int      `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers"`
}

var (
	bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "comma-separated broker addresses")
	timeout   = flag.Duration("timeout", 60*time.Second, "deadline for the whole scenario")
)

func brokers() []string { return strings.Split(*bootstrap, ",") }

// client is a kafka.Client on kafka-go's shared DefaultTransport.
func client() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers()...), Timeout: 10 * time.Second}
}

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: kafkago-check codecs|group|reader|admin [flags]")
	}
	cmd := os.Args[1]
	spec := flag.String("spec", "", "codecs: JSON file of the records to produce")
	topic := flag.String("topic", "", "topic")
	group := flag.String("group", "", "consumer group id")
	perPhase := flag.Int("per-phase", 200, "group: records produced in each phase; reader: before the first Reader")
	second := flag.Int("second", 20, "reader: records produced before the second Reader")
	if err := flag.CommandLine.Parse(os.Args[2:]); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var result any
	var err error
	switch cmd {
	case "codecs":
		result, err = runCodecs(ctx, *spec)
	case "group":
		result, err = runGroup(ctx, *topic, *group, *perPhase)
	case "reader":
		result, err = runReader(ctx, *topic, *group, *perPhase, *second)
	case "admin":
		result, err = runAdmin(ctx, *topic, *group)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	out := map[string]any{"result": result}
	if err != nil {
		out["error"] = err.Error()
	}
	if encodeErr := json.NewEncoder(os.Stdout).Encode(out); encodeErr != nil {
		log.Fatal(encodeErr)
	}
	if err != nil {
		os.Exit(1)
	}
}

var codecs = map[string]compress.Compression{
	"none":   0,
	"gzip":   kafka.Gzip,
	"snappy": kafka.Snappy,
	"lz4":    kafka.Lz4,
	"zstd":   kafka.Zstd,
}

// toPartition is the Balancer that keeps the partition the message names (a Writer has no
// other way to aim at one).
var toPartition = kafka.BalancerFunc(func(m kafka.Message, _ ...int) int { return m.Partition })

// runCodecs writes each partition's records through a Writer with that partition's codec
// (acks=all, synchronous), noting where the Writer's Completion says each went, then reads
// every partition back from offset 0.
func runCodecs(ctx context.Context, specFile string) (map[string]any, error) {
	raw, err := os.ReadFile(specFile)
	if err != nil {
		return nil, err
	}
	var spec Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, err
	}
	produced := map[string][]Placed{}
	for _, p := range spec.Partitions {
		placed, err := writeWith(ctx, spec.Topic, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Codec, err)
		}
		produced[p.Codec] = placed
	}
	var consumed []Consumed
	for _, p := range spec.Partitions {
		got, err := readPartition(ctx, spec.Topic, p.Partition, len(p.Records))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p.Codec, err)
		}
		consumed = append(consumed, got...)
	}
	return map[string]any{"produced": produced, "consumed": consumed}, nil
}

// writeWith writes one spec partition with its codec; each message carries its index in
// WriterData, so Completion can place it whatever the batching.
func writeWith(ctx context.Context, topic string, p SpecPartition) ([]Placed, error) {
	codec, ok := codecs[p.Codec]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", p.Codec)
	}
	placed := make([]Placed, len(p.Records))
	for i := range placed {
		placed[i] = Placed{Partition: -1, Offset: -1}
	}
	var mu sync.Mutex
	w := &kafka.Writer{
		Addr: kafka.TCP(brokers()...), Topic: topic, Balancer: toPartition,
		RequiredAcks: kafka.RequireAll, Compression: codec, BatchSize: len(p.Records),
		BatchTimeout: 10 * time.Millisecond,
		Completion: func(messages []kafka.Message, err error) {
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range messages {
				placed[m.WriterData.(int)] = Placed{Partition: m.Partition, Offset: m.Offset}
			}
		},
	}
	msgs := make([]kafka.Message, len(p.Records))
	for i, r := range p.Records {
		msgs[i] = kafka.Message{Partition: p.Partition, Key: r.Key, Value: r.Value, WriterData: i}
		for _, h := range r.Headers {
			msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	err := w.WriteMessages(ctx, msgs...)
	if closeErr := w.Close(); err == nil {
		err = closeErr
	}
	mu.Lock()
	defer mu.Unlock()
	return placed, err
}

// readPartition reads n records of a partition from offset 0 with a partition Reader.
func readPartition(ctx context.Context, topic string, partition, n int) ([]Consumed, error) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers(), Topic: topic, Partition: partition, MinBytes: 1, MaxBytes: 10 << 20,
		MaxWait: 200 * time.Millisecond,
	})
	defer r.Close()
	var out []Consumed
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return out, err
		}
		c := Consumed{Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: m.Value}
		for _, h := range m.Headers {
			c.Headers = append(c.Headers, Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, c)
	}
	return out, nil
}

// waitFor polls cond every 20 ms until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// addr is the first bootstrap address, for kafka.Client requests.
func addr() net.Addr { return kafka.TCP(brokers()[0]) }
