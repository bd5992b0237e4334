package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/kafkatest"
)

// benchPartitions is the partitions of the benchmark's topic.
const benchPartitions = 4

// BenchmarkConsume measures, in one run, a consumer group's throughput
// (records handled a second, until every one is handled) with a handler
// that does nothing: a plain franz-go member (poll, handle, commit after
// each poll, autocommit off) and a kafka.Consumer (idem on the in-memory
// store), each in a group of its own over the same b.N records with
// distinct keys, produced to 4 partitions of an in-process kfake cluster
// before either starts. It reports both rates and their ratio
// (idem/plain).
//
//	go test -run '^$' -bench BenchmarkConsume -benchtime 20000x ./consume/kafka/
func BenchmarkConsume(b *testing.B) {
	kc := kafkatest.Start(b, benchPartitions, topic)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range b.N {
		r := &kgo.Record{Topic: topic, Value: []byte("v"), Key: fmt.Appendf(nil, "k%d", i),
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: fmt.Appendf(nil, "m%d", i)}}}
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()

	plain := timeIt(b, func() { consumePlain(ctx, b, kc.Addrs, "plain") })
	withIdem := timeIt(b, func() { consumeIdem(ctx, b, kc.Addrs, "idem") })
	b.StopTimer()
	p, i := float64(b.N)/plain.Seconds(), float64(b.N)/withIdem.Seconds()
	b.ReportMetric(p, "plain-records/s")
	b.ReportMetric(i, "idem-records/s")
	b.ReportMetric(i/p, "idem/plain")
	b.ReportMetric(0, "ns/op") // the two rates say it
}

func timeIt(b *testing.B, f func()) time.Duration {
	b.Helper()
	start := time.Now()
	f()
	return time.Since(start)
}

// consumePlain consumes b.N records in group with a no-op handler.
func consumePlain(ctx context.Context, b *testing.B, addrs []string, group string) {
	opts := append(kafkatest.GroupOpts(addrs), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	handle := func(context.Context, *kgo.Record) error { return nil }
	n := 0
	for n < b.N && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			if handle(ctx, r) == nil {
				n++
			}
		})
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			b.Fatal(err)
		}
	}
	if n < b.N {
		b.Fatalf("plain: consumed %d of %d", n, b.N)
	}
}

// consumeIdem consumes b.N records in group through kafka.Consumer.
func consumeIdem(ctx context.Context, b *testing.B, addrs []string, group string) {
	rt := idemtest.Runtime(b, idem.Options{})
	cc, err := consume.New(consume.Options{Runtime: rt, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	c, err := kafka.New(kafka.Options{Consumer: cc, Group: group, Topics: []string{topic},
		Handler: func(context.Context, *kafka.Record) error { return nil },
		OnVerdict: func(_ *kafka.Record, v consume.Verdict) {
			if v.Decision == consume.Ack && n.Add(1) == int64(b.N) {
				stop()
			}
		}}, kafkatest.GroupOpts(addrs)...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(rctx); err != nil {
		b.Fatal(err)
	}
	if got := n.Load(); got < int64(b.N) {
		b.Fatalf("idem: consumed %d of %d", got, b.N)
	}
}
