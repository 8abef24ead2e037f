package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/segmentio/kafka-go"
)

// configSourceDynamicTopic is DescribeConfigs' DYNAMIC_TOPIC_CONFIG source (v1+): a key set
// on the topic itself.
const configSourceDynamicTopic = 1

type step struct {
	name string
	run  func() (any, error)
}

// runAdmin walks kafka.Client through a topic's life: create (3 partitions, configs), create
// again (already exists), describe configs, replace them (AlterConfigs), alter them
// incrementally, add partitions, produce, list offsets, commit, fetch and delete group
// offsets, list, describe and delete the group, delete the topic; then the older Conn API
// (Controller, CreateTopics, ReadPartitions, DeleteTopics) that kafka-go's README shows.
// Each step's observation goes into the result; the first failed call stops.
func runAdmin(ctx context.Context, topic, group string) (map[string]any, error) {
	cl := client()
	steps := append(topicSteps(ctx, cl, topic), groupSteps(ctx, cl, topic, group)...)
	steps = append(steps, connSteps(ctx, topic+"-conn")...)
	out := map[string]any{}
	for _, s := range steps {
		v, err := s.run()
		out[s.name] = v
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return out, nil
}

func topicSteps(ctx context.Context, cl *kafka.Client, topic string) []step {
	create := func() (*kafka.CreateTopicsResponse, error) {
		return cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
			Topic: topic, NumPartitions: 3, ReplicationFactor: 1,
			ConfigEntries: []kafka.ConfigEntry{
				{ConfigName: "retention.ms", ConfigValue: "3600000"},
				{ConfigName: "max.message.bytes", ConfigValue: "500000"},
			},
		}}})
	}
	return []step{
		{"create", func() (any, error) {
			r, err := create()
			if err != nil {
				return nil, err
			}
			return errorCode(r.Errors[topic]), nil
		}},
		{"create_again", func() (any, error) {
			r, err := create()
			if err != nil {
				return nil, err
			}
			return errorCode(r.Errors[topic]), nil
		}},
		{"partitions_after_create", func() (any, error) { return partitionCount(ctx, topic) }},
		{"configs_after_create", func() (any, error) { return topicConfigs(ctx, cl, topic) }},
		{"alter_configs", func() (any, error) {
			// AlterConfigs replaces the topic's whole set: max.message.bytes goes back to
			// its default.
			r, err := cl.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{{
				ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
				Configs: []kafka.AlterConfigRequestConfig{{Name: "retention.ms", Value: "7200000"}},
			}}})
			if err != nil {
				return nil, err
			}
			for _, e := range r.Errors {
				if e != nil {
					return nil, e
				}
			}
			return len(r.Errors), nil
		}},
		{"configs_after_alter", func() (any, error) { return topicConfigs(ctx, cl, topic) }},
		{"incremental_alter_configs", func() (any, error) {
			r, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
				Resources: []kafka.IncrementalAlterConfigsRequestResource{{
					ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
					Configs: []kafka.IncrementalAlterConfigsRequestConfig{
						{Name: "max.message.bytes", Value: "400000", ConfigOperation: kafka.ConfigOperationSet},
						{Name: "retention.ms", ConfigOperation: kafka.ConfigOperationDelete},
					},
				}},
			})
			if err != nil {
				return nil, err
			}
			for _, res := range r.Resources {
				if res.Error != nil {
					return nil, res.Error
				}
			}
			return len(r.Resources), nil
		}},
		{"configs_after_incremental_alter", func() (any, error) { return topicConfigs(ctx, cl, topic) }},
		{"create_partitions", func() (any, error) {
			r, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{
				Topics: []kafka.TopicPartitionsConfig{{Name: topic, Count: 5}},
			})
			if err != nil {
				return nil, err
			}
			// A Transport refreshes its metadata cache after CreateTopics but not after
			// CreatePartitions: until its MetadataTTL (6 s) runs out it answers a request
			// for a new partition with ErrNoPartition itself. A new Transport knows them.
			cl.Transport = uncached().Transport
			return nil, r.Errors[topic]
		}},
		{"partitions_after_create_partitions", func() (any, error) { return partitionCount(ctx, topic) }},
		{"produce", func() (any, error) {
			records := make([]kafka.Record, 10)
			for i := range records {
				records[i] = kafka.Record{Value: kafka.NewBytes([]byte(fmt.Sprintf("r%d", i)))}
			}
			r, err := cl.Produce(ctx, &kafka.ProduceRequest{
				Topic: topic, Partition: 4, RequiredAcks: kafka.RequireAll,
				Records: kafka.NewRecordReader(records...), Compression: kafka.Gzip,
			})
			if err != nil {
				return nil, err
			}
			return r.BaseOffset, r.Error
		}},
		{"produce_again", func() (any, error) {
			r, err := cl.Produce(ctx, &kafka.ProduceRequest{
				Topic: topic, Partition: 4, RequiredAcks: kafka.RequireAll,
				Records: kafka.NewRecordReader(kafka.Record{Value: kafka.NewBytes([]byte("r10"))}),
			})
			if err != nil {
				return nil, err
			}
			return r.BaseOffset, r.Error
		}},
		{"start_offsets", func() (any, error) { return listOffsets(ctx, cl, topic, 5, kafka.FirstOffsetOf) }},
		{"end_offsets", func() (any, error) { return listOffsets(ctx, cl, topic, 5, kafka.LastOffsetOf) }},
	}
}

func groupSteps(ctx context.Context, cl *kafka.Client, topic, group string) []step {
	return []step{
		{"commit", func() (any, error) {
			// A commit outside any generation (-1, no member), as an offset tool makes.
			r, err := cl.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
				GroupID: group, GenerationID: -1,
				Topics: map[string][]kafka.OffsetCommit{topic: {
					{Partition: 3, Offset: 0}, {Partition: 4, Offset: 8, Metadata: "admin"},
				}},
			})
			if err != nil {
				return nil, err
			}
			for _, p := range r.Topics[topic] {
				if p.Error != nil {
					return nil, fmt.Errorf("partition %d: %w", p.Partition, p.Error)
				}
			}
			return len(r.Topics[topic]), nil
		}},
		{"fetch_offsets", func() (any, error) { return committedOffsets(ctx, cl, topic, group, 5) }},
		{"fetch_metadata", func() (any, error) {
			r, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {4}}})
			if err != nil {
				return nil, err
			}
			if len(r.Topics[topic]) != 1 {
				return nil, fmt.Errorf("OffsetFetch answered %v", r.Topics)
			}
			return r.Topics[topic][0].Metadata, r.Error
		}},
		{"consumer_offsets", func() (any, error) {
			return cl.ConsumerOffsets(ctx, kafka.TopicAndGroup{Topic: topic, GroupId: group})
		}},
		{"offset_delete", func() (any, error) {
			r, err := cl.OffsetDelete(ctx, &kafka.OffsetDeleteRequest{GroupID: group, Topics: map[string][]int{topic: {3}}})
			if err != nil {
				return nil, err
			}
			if r.Error != nil {
				return nil, r.Error
			}
			for _, p := range r.Topics[topic] {
				if p.Error != nil {
					return nil, fmt.Errorf("partition %d: %w", p.Partition, p.Error)
				}
			}
			return len(r.Topics[topic]), nil
		}},
		{"fetch_offsets_after_offset_delete", func() (any, error) { return committedOffsets(ctx, cl, topic, group, 5) }},
		{"find_coordinator", func() (any, error) {
			r, err := cl.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{Key: group, KeyType: kafka.CoordinatorKeyTypeConsumer})
			if err != nil {
				return nil, err
			}
			if r.Error != nil {
				return nil, r.Error
			}
			return r.Coordinator.NodeID, nil
		}},
		{"list_groups", func() (any, error) {
			r, err := cl.ListGroups(ctx, &kafka.ListGroupsRequest{})
			if err != nil {
				return nil, err
			}
			var ids []string
			for _, g := range r.Groups {
				ids = append(ids, g.GroupID)
			}
			return ids, r.Error
		}},
		{"describe_group", func() (any, error) {
			r, err := cl.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
			if err != nil {
				return nil, err
			}
			if len(r.Groups) != 1 {
				return nil, fmt.Errorf("DescribeGroups answered %d groups", len(r.Groups))
			}
			g := r.Groups[0]
			return map[string]any{"group": g.GroupID, "state": g.GroupState, "members": len(g.Members)}, g.Error
		}},
		{"delete_group", func() (any, error) {
			r, err := cl.DeleteGroups(ctx, &kafka.DeleteGroupsRequest{GroupIDs: []string{group}})
			if err != nil {
				return nil, err
			}
			return len(r.Errors), r.Errors[group]
		}},
		{"fetch_offsets_after_delete_group", func() (any, error) { return committedOffsets(ctx, cl, topic, group, 5) }},
		{"delete_topic", func() (any, error) {
			r, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic}})
			if err != nil {
				return nil, err
			}
			return len(r.Errors), r.Errors[topic]
		}},
		{"topics_after_delete", func() (any, error) { return topicNames(ctx) }},
	}
}

// connSteps: the topic calls of kafka-go's README, on a Conn to the controller.
func connSteps(ctx context.Context, topic string) []step {
	var conn *kafka.Conn
	return []step{
		{"conn_controller", func() (any, error) {
			c, err := kafka.DialContext(ctx, "tcp", brokers()[0])
			if err != nil {
				return nil, err
			}
			defer c.Close()
			controller, err := c.Controller()
			if err != nil {
				return nil, err
			}
			conn, err = kafka.DialContext(ctx, "tcp", fmt.Sprintf("%s:%d", controller.Host, controller.Port))
			return controller.ID, err
		}},
		{"conn_create_topics", func() (any, error) {
			return nil, conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 2, ReplicationFactor: 1})
		}},
		{"conn_read_partitions", func() (any, error) {
			// A topic just created may not be in metadata yet on a real cluster; retry
			// UNKNOWN_TOPIC_OR_PARTITION for a while as kafka-go users do.
			var ids []int
			err := waitFor(ctx, "the created topic in metadata", func() bool {
				ps, err := conn.ReadPartitions(topic)
				ids = nil
				for _, p := range ps {
					ids = append(ids, p.ID)
				}
				return err == nil
			})
			sort.Ints(ids)
			return ids, err
		}},
		{"conn_delete_topics", func() (any, error) {
			defer conn.Close()
			return nil, conn.DeleteTopics(topic)
		}},
		{"topics_after_conn_delete", func() (any, error) { return topicNames(ctx) }},
	}
}

// errorCode is a Kafka error's code (36 for TOPIC_ALREADY_EXISTS), 0 for none, -1 for an
// error that is not a Kafka error code.
func errorCode(err error) int {
	var ke kafka.Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ke):
		return int(ke)
	default:
		return -1
	}
}

// uncached is a kafka.Client whose Metadata asks the broker: a Client answers Metadata from
// its Transport's cache (refreshed every MetadataTTL, 6 s, and after CreateTopics), so a
// new Transport is the way to see a deletion or new partitions at once.
func uncached() *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(brokers()...), Timeout: 10 * time.Second, Transport: &kafka.Transport{}}
}

func partitionCount(ctx context.Context, topic string) (int, error) {
	r, err := uncached().Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	if len(r.Topics) != 1 {
		return 0, fmt.Errorf("metadata answered %d topics", len(r.Topics))
	}
	return len(r.Topics[0].Partitions), r.Topics[0].Error
}

func topicNames(ctx context.Context) ([]string, error) {
	r, err := uncached().Metadata(ctx, &kafka.MetadataRequest{})
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, t := range r.Topics {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names, nil
}

// topicConfigs: the topic's configs that are set on the topic itself, key -> value.
func topicConfigs(ctx context.Context, cl *kafka.Client, topic string) (map[string]string, error) {
	r, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
	}}})
	if err != nil {
		return nil, err
	}
	if len(r.Resources) != 1 {
		return nil, fmt.Errorf("DescribeConfigs answered %d resources", len(r.Resources))
	}
	set := map[string]string{}
	for _, e := range r.Resources[0].ConfigEntries {
		if e.ConfigSource == configSourceDynamicTopic {
			set[e.ConfigName] = e.ConfigValue
		}
	}
	return set, r.Resources[0].Error
}

// listOffsets asks each partition's offset at `at` (FirstOffsetOf or LastOffsetOf) and
// returns kafka-go's [FirstOffset, LastOffset] pair for it: the one not asked stays -1.
func listOffsets(
	ctx context.Context, cl *kafka.Client, topic string, partitions int, at func(int) kafka.OffsetRequest,
) (map[int][2]int64, error) {
	var requests []kafka.OffsetRequest
	for p := 0; p < partitions; p++ {
		requests = append(requests, at(p))
	}
	r, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: requests}})
	if err != nil {
		return nil, err
	}
	got := map[int][2]int64{}
	for _, p := range r.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("partition %d: %w", p.Partition, p.Error)
		}
		got[p.Partition] = [2]int64{p.FirstOffset, p.LastOffset}
	}
	return got, nil
}

// committedOffsets: the group's committed offset of every partition (of the first n) that
// has one.
func committedOffsets(ctx context.Context, cl *kafka.Client, topic, group string, n int) (map[int]int64, error) {
	var partitions []int
	for p := 0; p < n; p++ {
		partitions = append(partitions, p)
	}
	r, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: partitions}})
	if err != nil {
		return nil, err
	}
	got := map[int]int64{}
	for _, p := range r.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("partition %d: %w", p.Partition, p.Error)
		}
		if p.CommittedOffset >= 0 {
			got[p.Partition] = p.CommittedOffset
		}
	}
	return got, r.Error
}
