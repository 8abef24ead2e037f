package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// member is one consumer group member: a kgo client polling in its own goroutine, committing
// each poll's records synchronously before it allows a rebalance (DisableAutoCommit +
// BlockRebalanceOnPoll), so a partition changes owner only at a committed offset.
type member struct {
	name   string
	client *kgo.Client
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	assigned map[int32]bool
	consumed []GroupRecord
	err      error
}

// GroupRecord is one record a member consumed, and in which phase.
type GroupRecord struct {
	Member    string `json:"member"`
	Phase     string `json:"phase"`
	Partition int32  `json:"partition"`
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

func setPhase(name string) {
	phase.Lock()
	phase.name = name
	phase.Unlock()
}

func startMember(name, topic, group string) (*member, error) {
	m := &member{name: name, stop: make(chan struct{}), done: make(chan struct{}), assigned: map[int32]bool{}}
	track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range parts[topic] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	cl, err := kgo.NewClient(options(
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(track(true)),
		kgo.OnPartitionsRevoked(track(false)),
		kgo.OnPartitionsLost(track(false)),
		kgo.FetchMaxWait(500*time.Millisecond),
	)...)
	if err != nil {
		return nil, err
	}
	m.client = cl
	go m.poll()
	return m, nil
}

func (m *member) poll() {
	defer close(m.done)
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fetches := m.client.PollRecords(ctx, 500)
		cancel()
		var failure error
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil && failure == nil {
				failure = fmt.Errorf("%s fetch %s[%d]: %w", m.name, t, p, err)
			}
		})
		records := fetches.Records()
		if len(records) > 0 && failure == nil {
			failure = m.client.CommitRecords(context.Background(), records...)
		}
		m.mu.Lock()
		for _, r := range records {
			m.consumed = append(m.consumed, GroupRecord{m.name, currentPhase(), r.Partition, r.Offset, string(r.Value)})
		}
		if failure != nil && m.err == nil {
			m.err = failure
		}
		m.mu.Unlock()
		m.client.AllowRebalance()
	}
}

// leave stops polling and closes the client, which sends LeaveGroup.
func (m *member) leave() {
	close(m.stop)
	<-m.done
	m.client.CloseAllowingRebalance()
}

func (m *member) snapshot() (assigned []int32, consumed int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.assigned {
		assigned = append(assigned, p)
	}
	sort.Slice(assigned, func(i, j int) bool { return assigned[i] < assigned[j] })
	return assigned, len(m.consumed), m.err
}

// groupRun is the scenario's state: the members, the producer, what each phase saw.
type groupRun struct {
	topic, group string
	partitions   int32
	producer     *kgo.Client
	admin        *kadm.Client
	members      []*member
	produced     int
	assignments  map[string]map[string][]int32
	described    map[string]any
}

// runGroup: member a alone, then b joins (the partitions split), then b leaves (a takes all
// back), each phase producing perPhase records and waiting until they are all consumed; then
// a leaves and a new member c must start exactly at the committed offsets.
func runGroup(ctx context.Context, topic, group string, perPhase int) (map[string]any, error) {
	producer, err := kgo.NewClient(options(kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	g := &groupRun{topic: topic, group: group, producer: producer, admin: kadm.NewClient(producer),
		assignments: map[string]map[string][]int32{}, described: map[string]any{}}
	topics, err := g.admin.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	g.partitions = int32(len(topics[topic].Partitions))
	out, err := g.phases(ctx, perPhase)
	for _, m := range g.members {
		select {
		case <-m.stop:
		default:
			m.leave()
		}
	}
	return out, err
}

func (g *groupRun) phases(ctx context.Context, perPhase int) (map[string]any, error) {
	a, err := g.join(ctx, "a")
	if err != nil {
		return g.result(), err
	}
	if err := g.phase(ctx, "alone", perPhase, func() bool { return g.owns(a, int(g.partitions)) }); err != nil {
		return g.result(), err
	}
	b, err := g.join(ctx, "b")
	if err != nil {
		return g.result(), err
	}
	split := func() bool { return g.owns(a, -1) && g.owns(b, -1) && g.covered(a, b) }
	if err := g.phase(ctx, "shared", perPhase, split); err != nil {
		return g.result(), err
	}
	b.leave()
	if err := g.phase(ctx, "after-leave", perPhase, func() bool { return g.owns(a, int(g.partitions)) }); err != nil {
		return g.result(), err
	}
	a.leave()
	if _, err := g.join(ctx, "c"); err != nil {
		return g.result(), err
	}
	// Produced before c is assigned anything: c must read these and nothing older.
	if err := g.phase(ctx, "late-member", 4, func() bool { return true }); err != nil {
		return g.result(), err
	}
	return g.result(), nil
}

func (g *groupRun) join(_ context.Context, name string) (*member, error) {
	m, err := startMember(name, g.topic, g.group)
	if err == nil {
		g.members = append(g.members, m)
	}
	return m, err
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
	seen := map[int32]bool{}
	for _, p := range append(x, y...) {
		if seen[p] {
			return false
		}
		seen[p] = true
	}
	return len(seen) == int(g.partitions)
}

// phase waits for the assignment, records it and the group as DescribeGroups shows it,
// produces n records round-robin over the partitions, and waits until the members have
// consumed every record produced so far.
func (g *groupRun) phase(ctx context.Context, name string, n int, assignment func() bool) error {
	setPhase(name)
	if err := g.waitMembers(ctx, "the "+name+" assignment", assignment); err != nil {
		return err
	}
	g.assignments[name] = map[string][]int32{}
	for _, m := range g.members {
		select {
		case <-m.stop:
			continue
		default:
		}
		assigned, _, _ := m.snapshot()
		g.assignments[name][m.name] = assigned
	}
	if described, err := g.admin.DescribeGroups(ctx, g.group); err == nil {
		d := described[g.group]
		members := map[string][]int32{}
		for _, m := range d.Members {
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					members[m.MemberID] = append(members[m.MemberID], t.Partitions...)
				}
			}
		}
		g.described[name] = map[string]any{"state": d.State, "protocol": d.Protocol, "members": members}
	}
	records := make([]*kgo.Record, n)
	for i := range records {
		p := int32(i) % g.partitions
		records[i] = &kgo.Record{Topic: g.topic, Partition: p, Value: []byte(fmt.Sprintf("%s-%d", name, i))}
	}
	if err := g.producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
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

func (g *groupRun) result() map[string]any {
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
	committed := map[int32]int64{}
	ends := map[int32]int64{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if offsets, err := g.admin.FetchOffsets(ctx, g.group); err == nil {
		offsets.Each(func(o kadm.OffsetResponse) { committed[o.Partition] = o.At })
	} else {
		errs = append(errs, "FetchOffsets: "+err.Error())
	}
	if listed, err := g.admin.ListEndOffsets(ctx, g.topic); err == nil {
		listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	} else {
		errs = append(errs, "ListEndOffsets: "+err.Error())
	}
	return map[string]any{
		"produced": g.produced, "consumed": consumed, "assignments": g.assignments,
		"described": g.described, "committed": committed, "log_end": ends, "member_errors": errs,
	}
}
