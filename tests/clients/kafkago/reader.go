package main

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// ReaderRecord is one record a group Reader fetched.
type ReaderRecord struct {
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

// runReader is kafka-go's most common consumer: a Reader with a GroupID, FetchMessage then a
// synchronous CommitMessages per record (CommitInterval 0). A first Reader reads the `first`
// records and closes (leaving the group); then `second` more are written and a second Reader
// of the same group must read exactly those, from the committed offsets.
func runReader(ctx context.Context, topic, group string, first, second int) (map[string]any, error) {
	w := &kafka.Writer{Addr: kafka.TCP(brokers()...), Topic: topic, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	out := map[string]any{}
	for _, round := range []struct {
		name string
		n    int
	}{{"first", first}, {"second", second}} {
		msgs := make([]kafka.Message, round.n)
		for i := range msgs {
			msgs[i] = kafka.Message{Value: []byte(fmt.Sprintf("%s-%d", round.name, i))}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return out, fmt.Errorf("writing %s: %w", round.name, err)
		}
		read, err := readAsGroup(ctx, topic, group, round.n)
		out[round.name] = read
		if err != nil {
			return out, fmt.Errorf("reading %s: %w", round.name, err)
		}
	}
	partitions, err := partitionCount(ctx, topic)
	if err != nil {
		return out, err
	}
	out["committed"], err = committedOffsets(ctx, client(), topic, group, partitions)
	if err != nil {
		return out, err
	}
	out["log_end"], err = listOffsets(ctx, client(), topic, partitions, kafka.LastOffsetOf)
	return out, err
}

// readAsGroup joins the group with a new Reader, fetches and commits n records, and closes.
func readAsGroup(ctx context.Context, topic, group string, n int) ([]ReaderRecord, error) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers(), GroupID: group, Topic: topic, MaxWait: 200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond, JoinGroupBackoff: 200 * time.Millisecond,
	})
	var read []ReaderRecord
	for len(read) < n {
		m, err := r.FetchMessage(ctx)
		if err == nil {
			err = r.CommitMessages(ctx, m)
		}
		if err != nil {
			r.Close()
			return read, err
		}
		read = append(read, ReaderRecord{m.Partition, m.Offset, string(m.Value)})
	}
	return read, r.Close()
}
