// Command sarama-check drives Sluice with sarama 1.22.1 (Debian's
// golang-github-shopify-sarama-dev) the way a typical Go service does: a SyncProducer
// (Version V2_1_0_0, hash partitioner, WaitForAll, Snappy, Return.Successes) sends keyed
// messages, a consumer group joins, and the producer sends more while the group is live.
// Every message's value is unique; the consumer group reads the whole topic and the program
// prints, as one JSON object, where SendMessages said each message went and where the group
// found it. The caller (tests/e2e/test_sarama.py) compares them. With -shared-client the
// producer and the group share one sarama.Client, hence one connection per broker, as many
// services do.
//
// Build offline against the Debian source tree:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o sarama-check .
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

// Placed is one message: its value, and a partition and offset (reported or consumed).
type Placed struct {
	Value     string `json:"value"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Result is the program's output.
type Result struct {
	// SentBefore: what SendMessages reported for the messages sent before the group joined.
	SentBefore []Placed `json:"sent_before"`
	// SentAfter: what SendMessages reported for the messages sent while the group is joined.
	SentAfter []Placed `json:"sent_after"`
	// Consumed: every message the group read, in arrival order.
	Consumed []Placed `json:"consumed"`
	// Claims: the partitions the group gave this member.
	Claims []int32 `json:"claims"`
	// GroupErrors: what the group reported on Errors() (sarama recovers from these itself).
	GroupErrors []string `json:"group_errors"`
	// Error: why the run stopped early, empty if it did not.
	Error string `json:"error,omitempty"`
}

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "comma-separated broker addresses")
	topic := flag.String("topic", "sarama", "topic (must exist)")
	group := flag.String("group", "sarama-group", "consumer group id")
	before := flag.Int("before", 2000, "messages SendMessages sends before the group joins")
	after := flag.Int("after", 5, "messages SendMessages sends after the group has joined")
	timeout := flag.Duration("timeout", 60*time.Second, "deadline for the whole run")
	verbose := flag.Bool("verbose", false, "sarama's logger on stderr")
	pause := flag.Duration("pause", 1500*time.Millisecond, "wait after the group has read the first messages (past one offset commit interval)")
	rounds := flag.Int("rounds", 1, "SendMessages calls of -after messages once the group has joined")
	shared := flag.Bool("shared-client", false, "producer and group share one sarama.Client (one connection)")
	flag.Parse()
	if *verbose {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Lmicroseconds)
	}
	result := run(strings.Split(*bootstrap, ","), *topic, *group, *before, *after, *timeout, *shared, *pause, *rounds)
	if err := json.NewEncoder(os.Stdout).Encode(result); err != nil {
		log.Fatal(err)
	}
	if result.Error != "" {
		os.Exit(1)
	}
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "sluice-sarama-check"
	c.Version = sarama.V2_1_0_0
	c.Producer.Partitioner = sarama.NewHashPartitioner
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Compression = sarama.CompressionSnappy
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Return.Errors = true
	c.Metadata.Retry.Backoff = 50 * time.Millisecond
	return c
}

func run(addrs []string, topic, group string, before, after int, timeout time.Duration, shared bool, pause time.Duration, rounds int) (r Result) {
	deadline := time.Now().Add(timeout)
	var client sarama.Client
	if shared {
		var err error
		if client, err = sarama.NewClient(addrs, config()); err != nil {
			r.Error = fmt.Sprintf("NewClient: %v", err)
			return r
		}
		defer client.Close()
	}
	producer, err := newProducer(addrs, client)
	if err != nil {
		r.Error = fmt.Sprintf("NewSyncProducer: %v", err)
		return r
	}
	defer producer.Close()
	if r.SentBefore, err = send(producer, topic, "before", before); err != nil {
		r.Error = err.Error()
		return r
	}
	member, err := joinGroup(addrs, client, topic, group)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer member.close()
	// Like a service that produces while its consumers are caught up: the group has read
	// (and, every Consumer.Offsets.CommitInterval, committed) everything sent so far.
	if r.Consumed, err = member.waitFor(before, deadline); err != nil {
		r.Error = err.Error()
		return r
	}
	time.Sleep(pause)
	for round := 0; round < rounds; round++ {
		sent, err := send(producer, topic, fmt.Sprintf("after%d", round), after)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		r.SentAfter = append(r.SentAfter, sent...)
		time.Sleep(pause / 4)
	}
	want := before + after*rounds
	r.Consumed, err = member.waitFor(want, deadline)
	r.Claims = member.claimed()
	r.GroupErrors = member.reported()
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

func newProducer(addrs []string, client sarama.Client) (sarama.SyncProducer, error) {
	if client != nil {
		return sarama.NewSyncProducerFromClient(client)
	}
	return sarama.NewSyncProducer(addrs, config())
}

// send sends n keyed messages in one SendMessages call and returns what it reported.
func send(producer sarama.SyncProducer, topic, phase string, n int) ([]Placed, error) {
	msgs := make([]*sarama.ProducerMessage, n)
	for i := range msgs {
		msgs[i] = &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%s-%d", phase, i)),
			Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", phase, i)),
		}
	}
	if err := producer.SendMessages(msgs); err != nil {
		return nil, fmt.Errorf("SendMessages (%s): %v", phase, err)
	}
	out := make([]Placed, n)
	for i, m := range msgs {
		out[i] = Placed{Value: fmt.Sprintf("%s-%d", phase, i), Partition: m.Partition, Offset: m.Offset}
	}
	return out, nil
}

// member is one consumer group member reading the topic into a list.
type member struct {
	group  sarama.ConsumerGroup
	cancel context.CancelFunc
	done   chan error

	mu       sync.Mutex
	consumed []Placed
	claims   []int32
	errors   []string
	setup    chan struct{}
	once     sync.Once
}

// joinGroup starts a member and returns once the group has given it its claims.
func joinGroup(addrs []string, client sarama.Client, topic, group string) (*member, error) {
	var g sarama.ConsumerGroup
	var err error
	if client != nil {
		g, err = sarama.NewConsumerGroupFromClient(group, client)
	} else {
		g, err = sarama.NewConsumerGroup(addrs, group, config())
	}
	if err != nil {
		return nil, fmt.Errorf("NewConsumerGroup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{group: g, cancel: cancel, done: make(chan error, 1), setup: make(chan struct{})}
	go func() {
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, m); err != nil {
				m.done <- fmt.Errorf("Consume: %v", err)
				return
			}
		}
		m.done <- nil
	}()
	select {
	case <-m.setup:
		return m, nil
	case err := <-m.done:
		return nil, fmt.Errorf("group never joined: %v", err)
	case err := <-g.Errors():
		return nil, fmt.Errorf("group error before joining: %v", err)
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("group %s did not join within 30 s", group)
	}
}

func (m *member) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	for _, ps := range s.Claims() {
		m.claims = append(m.claims, ps...)
	}
	m.mu.Unlock()
	m.once.Do(func() { close(m.setup) })
	return nil
}

func (m *member) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *member) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.mu.Lock()
		m.consumed = append(m.consumed, Placed{Value: string(msg.Value), Partition: msg.Partition, Offset: msg.Offset})
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (m *member) claimed() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.claims...)
}

func (m *member) reported() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.errors...)
}

// waitFor polls until the member has read n messages or the deadline passes.
func (m *member) waitFor(n int, deadline time.Time) ([]Placed, error) {
	for {
		m.mu.Lock()
		got := append([]Placed(nil), m.consumed...)
		m.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case err := <-m.group.Errors():
			m.mu.Lock()
			m.errors = append(m.errors, err.Error())
			m.mu.Unlock()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return got, fmt.Errorf("consumed %d of %d messages before the deadline", len(got), n)
		}
	}
}

func (m *member) close() {
	m.cancel()
	_ = m.group.Close()
	<-m.done
}
