package natsjs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/natstest"
)

// BenchmarkConsume measures a JetStream consumer's throughput (messages
// handled and acknowledged a second) with a handler that does nothing:
// plain (the handler acks) and through idem (the adapter, an in-memory
// store), with Consume (one message at a time) and with 8 goroutines
// calling Messages().Next (workers8). b.N messages with distinct ids are
// published before the timer starts; the timer stops when the last is
// handled.
//
//	go test -run '^$' -bench BenchmarkConsume -benchtime 20000x ./consume/natsjs/
func BenchmarkConsume(b *testing.B) {
	srv := natstest.Start(b)
	nc := srv.Connect(b)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	rt := idemtest.Runtime(b, idem.Options{})
	c, err := consume.New(consume.Options{Runtime: rt, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	plain := func(jetstream.Consumer) jetstream.MessageHandler {
		return func(m jetstream.Msg) { _ = m.Ack() }
	}
	withIdem := func(cons jetstream.Consumer) jetstream.MessageHandler {
		a, err := natsjs.ForConsumer(cons, natsjs.Options{Consumer: c})
		if err != nil {
			b.Fatal(err)
		}
		return a.Handler(context.Background(), func(context.Context, *natsjs.Message) error { return nil })
	}
	var seq atomic.Int64
	for _, bc := range []struct {
		name    string
		workers int
		handler func(jetstream.Consumer) jetstream.MessageHandler
	}{{"plain", 0, plain}, {"idem", 0, withIdem}, {"plain-workers8", 8, plain}, {"idem-workers8", 8, withIdem}} {
		b.Run(bc.name, func(b *testing.B) { benchConsume(b, js, seq.Add(1), bc.workers, bc.handler) })
	}
}

// benchConsume publishes b.N messages to a stream of its own and times
// their consumption by the handler handler returns: with Consume, or with
// workers goroutines calling Messages().Next.
func benchConsume(b *testing.B, js jetstream.JetStream, n int64, workers int, handler func(jetstream.Consumer) jetstream.MessageHandler) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cons := benchStream(ctx, b, js, fmt.Sprint("B", n))
	var count atomic.Int64
	done := make(chan struct{})
	h := handler(cons)
	handle := func(m jetstream.Msg) {
		h(m)
		if count.Add(1) == int64(b.N) {
			close(done)
		}
	}
	b.ResetTimer()
	stop := benchRun(b, cons, workers, handle)
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatalf("consumed %d of %d", count.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	stop()
}

// benchStream creates stream name with b.N messages and a consumer on it.
func benchStream(ctx context.Context, b *testing.B, js jetstream.JetStream, name string) jetstream.Consumer {
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	for i := range b.N {
		msg := nats.NewMsg(name + ".x")
		msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprint("m", i))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 || i == b.N-1 { // under the client's bound on pending publishes
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				b.Fatal("publishing timed out")
			}
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, name, jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		b.Fatal(err)
	}
	return cons
}

// benchRun consumes cons with handle and returns how to stop.
func benchRun(b *testing.B, cons jetstream.Consumer, workers int, handle func(jetstream.Msg)) (stop func()) {
	if workers == 0 {
		cc, err := cons.Consume(handle)
		if err != nil {
			b.Fatal(err)
		}
		return func() { cc.Stop(); <-cc.Closed() }
	}
	it, err := cons.Messages()
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				m, err := it.Next()
				if err != nil {
					return // stopped
				}
				handle(m)
			}
		})
	}
	return func() { it.Stop(); wg.Wait() }
}
