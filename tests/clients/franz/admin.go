package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runAdmin walks kadm through a topic's life: create (3 partitions, configs), create again
// (already exists), list, describe and alter configs, add partitions, produce and delete
// records, commit and fetch group offsets, list and describe the group, delete the group
// and the topic. Each step's observation goes into the result; the first failed call stops.
func runAdmin(ctx context.Context, topic, group string) (map[string]any, error) {
	cl, err := kgo.NewClient(options(kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	out := map[string]any{}
	steps := []struct {
		name string
		run  func() (any, error)
	}{
		{"create", func() (any, error) {
			configs := map[string]*string{"retention.ms": kadm.StringPtr("3600000"), "max.message.bytes": kadm.StringPtr("500000")}
			r, err := adm.CreateTopic(ctx, 3, 1, configs, topic)
			return r.Topic, err
		}},
		{"create_again", func() (any, error) {
			_, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
			return errorName(err), nil
		}},
		{"partitions_after_create", func() (any, error) { return partitionCount(ctx, adm, topic) }},
		{"configs_after_create", func() (any, error) { return topicConfigs(ctx, adm, topic) }},
		{"alter", func() (any, error) {
			rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
				{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
				{Op: kadm.DeleteConfig, Name: "max.message.bytes"},
			}, topic)
			if err == nil && len(rs) == 1 {
				err = rs[0].Err
			}
			return nil, err
		}},
		{"configs_after_alter", func() (any, error) { return topicConfigs(ctx, adm, topic) }},
		{"create_partitions", func() (any, error) {
			rs, err := adm.CreatePartitions(ctx, 2, topic)
			if err == nil {
				err = rs[topic].Err
			}
			return nil, err
		}},
		{"partitions_after_create_partitions", func() (any, error) { return partitionCount(ctx, adm, topic) }},
		{"produce", func() (any, error) {
			records := make([]*kgo.Record, 10)
			for i := range records {
				records[i] = &kgo.Record{Topic: topic, Partition: 4, Value: []byte(fmt.Sprintf("r%d", i))}
			}
			return nil, cl.ProduceSync(ctx, records...).FirstErr()
		}},
		{"delete_records", func() (any, error) {
			var os kadm.Offsets
			os.AddOffset(topic, 4, 6, -1)
			rs, err := adm.DeleteRecords(ctx, os)
			if err != nil {
				return nil, err
			}
			r := rs[topic][4]
			return r.LowWatermark, r.Err
		}},
		{"start_offsets", func() (any, error) { return listed(adm.ListStartOffsets(ctx, topic)) }},
		{"end_offsets", func() (any, error) { return listed(adm.ListEndOffsets(ctx, topic)) }},
		{"commit", func() (any, error) {
			var os kadm.Offsets
			os.AddOffset(topic, 4, 8, -1)
			rs, err := adm.CommitOffsets(ctx, group, os)
			if err == nil {
				err = rs.Error()
			}
			return nil, err
		}},
		{"fetch_offsets", func() (any, error) {
			rs, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				return nil, err
			}
			got := map[int32]int64{}
			rs.Each(func(o kadm.OffsetResponse) { got[o.Partition] = o.At })
			return got, rs.Error()
		}},
		{"list_groups", func() (any, error) {
			gs, err := adm.ListGroups(ctx)
			return gs.Groups(), err
		}},
		{"describe_group", func() (any, error) {
			ds, err := adm.DescribeGroups(ctx, group)
			if err != nil {
				return nil, err
			}
			d := ds[group]
			return map[string]any{"state": d.State, "members": len(d.Members)}, d.Err
		}},
		{"delete_group", func() (any, error) {
			rs, err := adm.DeleteGroup(ctx, group)
			if err == nil {
				err = rs.Err
			}
			return nil, err
		}},
		{"fetch_offsets_after_delete_group", func() (any, error) {
			rs, err := adm.FetchOffsets(ctx, group)
			return len(rs.Offsets()), err
		}},
		{"delete_topic", func() (any, error) {
			r, err := adm.DeleteTopic(ctx, topic)
			if err == nil {
				err = r.Err
			}
			return nil, err
		}},
		{"topics_after_delete", func() (any, error) {
			ts, err := adm.ListTopics(ctx)
			return ts.Names(), err
		}},
	}
	for _, s := range steps {
		v, err := s.run()
		out[s.name] = v
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return out, nil
}

// errorName is a Kafka error's name (TOPIC_ALREADY_EXISTS), or the error text.
func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	ts, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	t, ok := ts[topic]
	if !ok {
		return 0, fmt.Errorf("topic %s not listed", topic)
	}
	return len(t.Partitions), t.Err
}

// topicConfigs: the topic's configs that are set on the topic itself, key -> value.
func topicConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
	rs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	r, err := rs.On(topic, nil)
	if err != nil {
		return nil, err
	}
	set := map[string]string{}
	for _, c := range r.Configs {
		if c.Source.String() == "DYNAMIC_TOPIC_CONFIG" && c.Value != nil {
			set[c.Key] = *c.Value
		}
	}
	return set, r.Err
}

func listed(os kadm.ListedOffsets, err error) (map[int32]int64, error) {
	if err != nil {
		return nil, err
	}
	got := map[int32]int64{}
	os.Each(func(o kadm.ListedOffset) { got[o.Partition] = o.Offset })
	return got, os.Error()
}
