package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// GroupRecord is one record a member consumed, and in which phase.
type GroupRecord struct {
	Member    string `json:"member"`
	Phase     string `json:"phase"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

// phase is the current scenario phase, stamped on every consumed record.
var phase struct {
	sync.Mutex
	name string
}

func currentPhase() string {
	phase.Lock()
	defer phase.Unlock()
	return phase.name
}

// member is one kafka.ConsumerGroup member: each generation it reads its assigned partitions
// from the offsets the group gave it and commits every record before counting it consumed,
// so a partition changes owner only at a committed offset.
type member struct {
	name  string
	group *kafka.ConsumerGroup
	done  chan struct{}

	mu       sync.Mutex
	assigned []int
	consumed []GroupRecord
	err      error
}

func startMember(name, topic, groupID string) (*member, error) {
	g, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID: groupID, Brokers: brokers(), Topics: []string{topic},
		HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
		RebalanceTimeout: 10 * time.Second, JoinGroupBackoff: 200 * time.Millisecond,
		StartOffset: kafka.FirstOffset,
	})
	if err != nil {
		return nil, err
	}
	m := &member{name: name, group: g, done: make(chan struct{})}
	go m.run(topic)
	return m, nil
}

func (m *member) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

// run takes generation after generation until the group is closed.
func (m *member) run(topic string) {
	defer close(m.done)
	for {
		gen, err := m.group.Next(context.Background())
		if errors.Is(err, kafka.ErrGroupClosed) {
			return
		}
		if err != nil {
			m.fail(fmt.Errorf("%s Next: %w", m.name, err))
			return
		}
		assignments := gen.Assignments[topic]
		var ids []int
		for _, a := range assignments {
			ids = append(ids, a.ID)
		}
		sort.Ints(ids)
		m.mu.Lock()
		m.assigned = ids
		m.mu.Unlock()
		for _, a := range assignments {
			a := a
			gen.Start(func(ctx context.Context) { m.readPartition(ctx, gen, topic, a) })
		}
	}
}

// readPartition reads one assigned partition until the generation ends, committing each
// record (offset + 1) before it counts.
func (m *member) readPartition(ctx context.Context, gen *kafka.Generation, topic string, a kafka.PartitionAssignment) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers(), Topic: topic, Partition: a.ID, MinBytes: 1, MaxBytes: 10 << 20,
		MaxWait: 200 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(a.Offset); err != nil {
		m.fail(err)
		return
	}
	for {
		msg, err := r.ReadMessage(ctx)
		if err != nil {
			return // the generation ended (or the group closed)
		}
		if err := gen.CommitOffsets(map[string]map[int]int64{topic: {a.ID: msg.Offset + 1}}); err != nil {
			return // not committed: the next owner reads it again
		}
		m.mu.Lock()
		m.consumed = append(m.consumed, GroupRecord{m.name, currentPhase(), msg.Partition, msg.Offset, string(msg.Value)})
		m.mu.Unlock()
	}
}

// leave closes the group (LeaveGroup) and waits for the member's loop to end.
func (m *member) leave() {
	m.group.Close()
	<-m.done
	m.mu.Lock()
	m.assigned = nil
	m.mu.Unlock()
}

func (m *member) snapshot() (assigned []int, consumed int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.assigned...), len(m.consumed), m.err
}

type groupRun struct {
	topic, group string
	partitions   int
	writer       *kafka.Writer
	members      []*member
	left         map[*member]bool
	produced     int
	assignments  map[string]map[string][]int
	described    map[string]any
}

// runGroup: member a alone, then b joins (the partitions split), then b leaves (a takes all
// back), each phase producing perPhase records and waiting until they are all consumed; then
// a leaves and a new member c must start exactly at the committed offsets.
func runGroup(ctx context.Context, topic, group string, perPhase int) (map[string]any, error) {
	meta, err := client().Metadata(ctx, &kafka.MetadataRequest{Addr: addr(), Topics: []string{topic}})
	if err != nil {
		return nil, err
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers()...), Topic: topic, Balancer: toPartition,
		RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	g := &groupRun{topic: topic, group: group, partitions: len(meta.Topics[0].Partitions), writer: w,
		left: map[*member]bool{}, assignments: map[string]map[string][]int{}, described: map[string]any{}}
	out, err := g.phases(ctx, perPhase)
	for _, m := range g.members {
		if !g.left[m] {
			m.leave()
		}
	}
	return out, err
}

func (g *groupRun) phases(ctx context.Context, perPhase int) (map[string]any, error) {
	a, err := g.join("a")
	if err != nil {
		return g.result(ctx), err
	}
	if err := g.phase(ctx, "alone", perPhase, func() bool { return g.owns(a, g.partitions) }); err != nil {
		return g.result(ctx), err
	}
	b, err := g.join("b")
	if err != nil {
		return g.result(ctx), err
	}
	split := func() bool { return g.owns(a, -1) && g.owns(b, -1) && g.covered(a, b) }
	if err := g.phase(ctx, "shared", perPhase, split); err != nil {
		return g.result(ctx), err
	}
	g.leave(b)
	if err := g.phase(ctx, "after-leave", perPhase, func() bool { return g.owns(a, g.partitions) }); err != nil {
		return g.result(ctx), err
	}
	g.leave(a)
	c, err := g.join("c")
	if err != nil {
		return g.result(ctx), err
	}
	if err := g.phase(ctx, "late-member", 4, func() bool { return g.owns(c, g.partitions) }); err != nil {
		return g.result(ctx), err
	}
	return g.result(ctx), nil
}

func (g *groupRun) join(name string) (*member, error) {
	m, err := startMember(name, g.topic, g.group)
	if err == nil {
		g.members = append(g.members, m)
	}
	return m, err
}

func (g *groupRun) leave(m *member) {
	m.leave()
	g.left[m] = true
}

// owns: m holds exactly n partitions (n < 0: at least one).
func (g *groupRun) owns(m *member, n int) bool {
	assigned, _, _ := m.snapshot()
	if n < 0 {
		return len(assigned) > 0
	}
	return len(assigned) == n
}

// covered: a and b together hold every partition, none twice.
func (g *groupRun) covered(a, b *member) bool {
	x, _, _ := a.snapshot()
	y, _, _ := b.snapshot()
	seen := map[int]bool{}
	for _, p := range append(x, y...) {
		if seen[p] {
			return false
		}
		seen[p] = true
	}
	return len(seen) == g.partitions
}

// phase waits for the assignment, records it and the group as DescribeGroups shows it,
// produces n records round-robin over the partitions, and waits until the members have
// consumed every record produced so far.
func (g *groupRun) phase(ctx context.Context, name string, n int, assignment func() bool) error {
	phase.Lock()
	phase.name = name
	phase.Unlock()
	if err := g.waitMembers(ctx, "the "+name+" assignment", assignment); err != nil {
		return err
	}
	g.assignments[name] = map[string][]int{}
	for _, m := range g.members {
		if !g.left[m] {
			assigned, _, _ := m.snapshot()
			g.assignments[name][m.name] = assigned
		}
	}
	if d, err := client().DescribeGroups(ctx, &kafka.DescribeGroupsRequest{Addr: addr(), GroupIDs: []string{g.group}}); err == nil && len(d.Groups) == 1 {
		members := map[string][]int{}
		for _, m := range d.Groups[0].Members {
			for _, t := range m.MemberAssignments.Topics {
				members[m.MemberID] = append(members[m.MemberID], t.Partitions...)
			}
		}
		g.described[name] = map[string]any{"state": d.Groups[0].GroupState, "members": members}
	}
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Partition: i % g.partitions, Value: []byte(fmt.Sprintf("%s-%d", name, i))}
	}
	if err := g.writer.WriteMessages(ctx, msgs...); err != nil {
		return err
	}
	g.produced += n
	return g.waitMembers(ctx, "every record of "+name, func() bool { return g.consumed() >= g.produced })
}

// waitMembers is waitFor that also fails on a member's error.
func (g *groupRun) waitMembers(ctx context.Context, what string, cond func() bool) error {
	return waitFor(ctx, what, func() bool {
		for _, m := range g.members {
			if _, _, err := m.snapshot(); err != nil {
				return true
			}
		}
		return cond()
	})
}

func (g *groupRun) consumed() int {
	total := 0
	for _, m := range g.members {
		_, n, _ := m.snapshot()
		total += n
	}
	return total
}

func (g *groupRun) result(ctx context.Context) map[string]any {
	var consumed []GroupRecord
	var errs []string
	for _, m := range g.members {
		m.mu.Lock()
		consumed = append(consumed, m.consumed...)
		if m.err != nil {
			errs = append(errs, m.err.Error())
		}
		m.mu.Unlock()
	}
	committed := map[int]int64{}
	ends := map[int]int64{}
	var parts []int
	for p := 0; p < g.partitions; p++ {
		parts = append(parts, p)
	}
	fetched, err := client().OffsetFetch(ctx, &kafka.OffsetFetchRequest{Addr: addr(), GroupID: g.group, Topics: map[string][]int{g.topic: parts}})
	if err == nil {
		for _, p := range fetched.Topics[g.topic] {
			committed[p.Partition] = p.CommittedOffset
		}
	} else {
		errs = append(errs, "OffsetFetch: "+err.Error())
	}
	var requests []kafka.OffsetRequest
	for _, p := range parts {
		requests = append(requests, kafka.LastOffsetOf(p))
	}
	listed, err := client().ListOffsets(ctx, &kafka.ListOffsetsRequest{Addr: addr(), Topics: map[string][]kafka.OffsetRequest{g.topic: requests}})
	if err == nil {
		for _, p := range listed.Topics[g.topic] {
			ends[p.Partition] = p.LastOffset
		}
	} else {
		errs = append(errs, "ListOffsets: "+err.Error())
	}
	return map[string]any{
		"produced": g.produced, "consumed": consumed, "assignments": g.assignments,
		"described": g.described, "committed": committed, "log_end": ends, "member_errors": errs,
	}
}
