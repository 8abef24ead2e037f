// Command franz-check drives Sluice with franz-go (kgo and kadm) the way Go services use it.
// Each subcommand runs one scenario and prints one JSON object on stdout; the caller
// (tests/e2e/test_franz_go.py) asserts on it. Stderr carries franz-go's log with -verbose.
//
//	franz-check codecs -bootstrap B -spec FILE   produce a spec's records (one codec per
//	                                              partition, the default idempotent producer),
//	                                              read them back with a partition consumer
//	franz-check group  -bootstrap B -topic T -group G -per-phase N
//	                                              two group members: join, rebalance, leave
//	franz-check admin  -bootstrap B -topic T -group G
//	                                              kadm topic, config, record and group operations
//	franz-check txn    -bootstrap B -topic T      transactions committed and aborted, read back
//	                                              read_committed and read_uncommitted
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
	Partition int32        `json:"partition"`
	Codec     string       `json:"codec"`
	Records   []SpecRecord `json:"records"`
}

type Spec struct {
	Topic      string          `json:"topic"`
	Partitions []SpecPartition `json:"partitions"`
}

// Consumed is one record as a consumer returned it.
type Consumed struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []Header `json:"headers"`
	// Codec: the compression attribute of the batch the record came in.
	Codec uint8 `json:"codec"`
}

// Placed is where a producer said a record went.
type Placed struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

var (
	bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "comma-separated broker addresses")
	timeout   = flag.Duration("timeout", 60*time.Second, "deadline for the whole scenario")
	verbose   = flag.Bool("verbose", false, "franz-go's log on stderr")
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: franz-check codecs|group|admin|txn [flags]")
	}
	cmd := os.Args[1]
	spec := flag.String("spec", "", "codecs: JSON file of the records to produce")
	topic := flag.String("topic", "", "topic")
	group := flag.String("group", "", "consumer group id")
	perPhase := flag.Int("per-phase", 200, "group: records produced in each phase")
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
	case "admin":
		result, err = runAdmin(ctx, *topic, *group)
	case "txn":
		result, err = runTxn(ctx, *topic)
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

// options are every client's common options: the seeds, a client id, the optional logger.
func options(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID("sluice-franz-check")}
	if *verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return append(opts, extra...)
}

var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

func toRecord(topic string, partition int32, r SpecRecord) *kgo.Record {
	rec := &kgo.Record{Topic: topic, Partition: partition, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return rec
}

func fromRecord(r *kgo.Record) Consumed {
	c := Consumed{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Codec: r.Attrs.CompressionType()}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return c
}

// runCodecs produces each partition's records with its codec through its own idempotent
// producer (franz-go's default: acks=all, idempotent), then reads every partition from the
// start with a direct (group-less) consumer.
func runCodecs(ctx context.Context, path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var spec Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, err
	}
	produced := map[string][]Placed{}
	want := 0
	for _, p := range spec.Partitions {
		codec, ok := codecs[p.Codec]
		if !ok {
			return nil, fmt.Errorf("unknown codec %q", p.Codec)
		}
		placed, err := produceWith(ctx, spec.Topic, p, codec)
		if err != nil {
			return nil, fmt.Errorf("produce %s: %w", p.Codec, err)
		}
		produced[p.Codec] = placed
		want += len(p.Records)
	}
	offsets := map[int32]kgo.Offset{}
	for _, p := range spec.Partitions {
		offsets[p.Partition] = kgo.NewOffset().AtStart()
	}
	consumer, err := kgo.NewClient(options(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.Topic: offsets}))...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var consumed []Consumed
	for len(consumed) < want {
		fetches := consumer.PollFetches(ctx)
		if err := fetchError(ctx, fetches); err != nil {
			return map[string]any{"produced": produced, "consumed": consumed}, err
		}
		fetches.EachRecord(func(r *kgo.Record) { consumed = append(consumed, fromRecord(r)) })
	}
	return map[string]any{"produced": produced, "consumed": consumed}, nil
}

func produceWith(ctx context.Context, topic string, p SpecPartition, codec kgo.CompressionCodec) ([]Placed, error) {
	cl, err := kgo.NewClient(options(
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	records := make([]*kgo.Record, len(p.Records))
	for i, r := range p.Records {
		records[i] = toRecord(topic, p.Partition, r)
	}
	results := cl.ProduceSync(ctx, records...)
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	placed := make([]Placed, len(results))
	for i, r := range results {
		placed[i] = Placed{Partition: r.Record.Partition, Offset: r.Record.Offset}
	}
	return placed, nil
}

// fetchError is the first error of a poll; a done context is the scenario's deadline.
func fetchError(ctx context.Context, fetches kgo.Fetches) error {
	if ctx.Err() != nil {
		return fmt.Errorf("deadline: %w", ctx.Err())
	}
	var first error
	fetches.EachError(func(t string, p int32, err error) {
		if first == nil && !errors.Is(err, context.Canceled) {
			first = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
		}
	})
	return first
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
