package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/kafkatest"
)

const (
	topic = "orders"
	group = "g"
	dlt   = "orders-dlt"
	retry = "orders-retry"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), idemtest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// env is a test's world: a cluster with the topic (partitions
// partitions), the dead-letter and retry topics, a producer, and an idem
// runtime on the in-memory store.
type env struct {
	kc   *kafkatest.Cluster
	prod *kgo.Client
	adm  *kadm.Client
	rt   *idem.Runtime
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	kc := kafkatest.Start(t, partitions, topic, dlt, retry)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	return &env{kc: kc, prod: prod, adm: kadm.NewClient(prod),
		rt: idemtest.Runtime(t, idem.Options{Policy: idem.Policy{Lease: 2 * time.Second}})}
}

// consumer returns a consume.Consumer on e's runtime, with short delays.
func (e *env) consumer(t testing.TB, settle time.Duration) *consume.Consumer {
	t.Helper()
	c, err := consume.New(consume.Options{Runtime: e.rt, Policy: idem.Policy{Settle: settle},
		MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start builds a member with opts (Consumer, Group and Topics filled when
// left empty) and runs it until the end of the test.
func (e *env) start(t testing.TB, opts kafka.Options) *kafka.Consumer {
	t.Helper()
	if opts.Consumer == nil {
		opts.Consumer = e.consumer(t, 5*time.Second)
	}
	if opts.Group == "" {
		opts.Group = group
	}
	if opts.Topics == nil {
		opts.Topics = []string{topic}
	}
	if opts.CommitInterval == 0 {
		opts.CommitInterval = 50 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := kafka.New(opts, kafkatest.GroupOpts(e.kc.Addrs)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

// produce writes a record with key in the Idempotency-Key header to
// partition, copies times.
func (e *env) produce(t testing.TB, partition int32, key string, copies int) {
	t.Helper()
	for range copies {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte("value of " + key),
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: []byte(key)}}}
		if err := e.prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// committed returns the group's committed offset of partition (-1 for
// none).
func (e *env) committed(t testing.TB, partition int32) int64 {
	t.Helper()
	os, err := e.adm.FetchOffsets(testCtx(t), group)
	if err != nil {
		return -1
	}
	o, ok := os.Lookup(topic, partition)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// end returns the end offset of topic's partition.
func (e *env) end(t testing.TB, tpc string, partition int32) int64 {
	t.Helper()
	l, err := e.adm.ListEndOffsets(testCtx(t), tpc)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := l.Lookup(tpc, partition)
	return o.Offset
}

// allCommitted waits until every partition's committed offset is its end.
func (e *env) allCommitted(t testing.TB, partitions int32) {
	t.Helper()
	idemtest.Eventually(t, "every record committed", func() bool {
		for p := range partitions {
			if e.committed(t, p) != e.end(t, topic, p) {
				return false
			}
		}
		return true
	})
}

// commits lists the OffsetCommit requests the cluster receives, as
// "<member> <partition>@<offset>" for the topic, and calls check (if not
// nil) on each before the cluster handles it.
type commits struct {
	mu   sync.Mutex
	list []commit
}

type commit struct {
	member    string
	partition int32
	offset    int64
}

func (e *env) watchCommits(check func(commit)) *commits {
	cs := &commits{}
	isTopic := e.isTopic(topic)
	e.kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		for _, tt := range r.Topics {
			if !isTopic(tt) {
				continue
			}
			for _, p := range tt.Partitions {
				c := commit{member: r.MemberID, partition: p.Partition, offset: p.Offset}
				if check != nil {
					check(c)
				}
				cs.mu.Lock()
				cs.list = append(cs.list, c)
				cs.mu.Unlock()
			}
		}
		return nil, nil, false
	})
	return cs
}

// isTopic returns whether an OffsetCommit request's topic is tpc: by
// name, or by topic ID (OffsetCommit v10 and later name topics by ID
// only, with the name left empty).
func (e *env) isTopic(tpc string) func(kmsg.OffsetCommitRequestTopic) bool {
	info := e.kc.TopicInfo(tpc) // not from a control function: it would wait on the cluster's loop
	return func(tt kmsg.OffsetCommitRequestTopic) bool {
		return tt.Topic == tpc || (info != nil && tt.TopicID == info.TopicID)
	}
}

func (cs *commits) all() []commit {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]commit(nil), cs.list...)
}

// effects counts handler runs per key.
type effects struct {
	mu sync.Mutex
	m  map[string]int
}

func newEffects() *effects { return &effects{m: map[string]int{}} }

func (f *effects) add(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[key]++
	return f.m[key]
}

func (f *effects) get(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[key]
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// refuseProduce answers a produce request with
// TOPIC_AUTHORIZATION_FAILED when refuse is set (handled: true).
func refuseProduce(req kmsg.Request, refuse bool) (kmsg.Response, bool) {
	r := req.(*kmsg.ProduceRequest)
	if !refuse {
		return nil, false
	}
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, tt := range r.Topics {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = tt.Topic
		rt.TopicID = tt.TopicID
		for _, p := range tt.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = 29 // TOPIC_AUTHORIZATION_FAILED
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, true
}

// assignedTo returns the member the group assigns partition of the topic
// to ("" for none).
func (e *env) assignedTo(t testing.TB, partition int32) string {
	t.Helper()
	gs, err := e.adm.DescribeGroups(testCtx(t), group)
	if err != nil {
		return ""
	}
	for _, m := range gs[group].Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			continue
		}
		for _, tt := range a.Topics {
			if tt.Topic == topic && slices.Contains(tt.Partitions, partition) {
				return m.MemberID
			}
		}
	}
	return ""
}
