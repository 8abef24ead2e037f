package main

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runTxn: a transactional producer commits 10 records, aborts 10, commits 10 more, all to
// partition 0; then a read_committed and a read_uncommitted consumer read the partition to
// its end. The committed reader must see the 20 committed values only.
func runTxn(ctx context.Context, topic string) (map[string]any, error) {
	producer, err := kgo.NewClient(options(
		kgo.TransactionalID("sluice-franz-"+topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	out := map[string]any{}
	for _, round := range []struct {
		name   string
		commit kgo.TransactionEndTry
	}{{"commit-1", kgo.TryCommit}, {"abort", kgo.TryAbort}, {"commit-2", kgo.TryCommit}} {
		if err := producer.BeginTransaction(); err != nil {
			return out, fmt.Errorf("begin %s: %w", round.name, err)
		}
		records := make([]*kgo.Record, 10)
		for i := range records {
			records[i] = &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", round.name, i))}
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			return out, fmt.Errorf("produce %s: %w", round.name, err)
		}
		if err := producer.EndTransaction(ctx, round.commit); err != nil {
			return out, fmt.Errorf("end %s: %w", round.name, err)
		}
	}
	// The last commit's marker is the partition's last offset: both readers stop there.
	committed, err := readAll(ctx, topic, kgo.ReadCommitted(), "commit-2-9")
	out["read_committed"] = committed
	if err != nil {
		return out, fmt.Errorf("read_committed: %w", err)
	}
	uncommitted, err := readAll(ctx, topic, kgo.ReadUncommitted(), "commit-2-9")
	out["read_uncommitted"] = uncommitted
	if err != nil {
		return out, fmt.Errorf("read_uncommitted: %w", err)
	}
	return out, nil
}

// readAll reads partition 0 from the start until it has seen the value `last`.
func readAll(ctx context.Context, topic string, level kgo.IsolationLevel, last string) ([]string, error) {
	cl, err := kgo.NewClient(options(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(level),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var values []string
	for len(values) == 0 || values[len(values)-1] != last {
		fetches := cl.PollFetches(ctx)
		if err := fetchError(ctx, fetches); err != nil {
			return values, err
		}
		fetches.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	return values, nil
}
