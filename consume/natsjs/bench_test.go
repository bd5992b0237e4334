package natsjs_test

import (
	"context"
	"fmt"
	"log/slog"
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
// store). b.N messages with distinct ids are published before the timer
// starts; the timer stops when the last is handled.
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
	var seq atomic.Int64
	b.Run("plain", func(b *testing.B) {
		benchConsume(b, js, seq.Add(1), func(jetstream.Consumer) jetstream.MessageHandler {
			return nil
		})
	})
	b.Run("idem", func(b *testing.B) {
		benchConsume(b, js, seq.Add(1), func(cons jetstream.Consumer) jetstream.MessageHandler {
			a, err := natsjs.ForConsumer(cons, natsjs.Options{Consumer: c})
			if err != nil {
				b.Fatal(err)
			}
			return a.Handler(context.Background(), func(context.Context, *natsjs.Message) error { return nil })
		})
	})
}

// benchConsume publishes b.N messages to a stream of its own and times
// their consumption by the handler handler returns (nil: a plain handler
// that acks).
func benchConsume(b *testing.B, js jetstream.JetStream, n int64, handler func(jetstream.Consumer) jetstream.MessageHandler) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := fmt.Sprint("B", n)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}}); err != nil {
		b.Fatal(err)
	}
	defer js.DeleteStream(context.Background(), name)
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
	var count atomic.Int64
	done := make(chan struct{})
	handled := func() {
		if count.Add(1) == int64(b.N) {
			close(done)
		}
	}
	h := handler(cons)
	if h == nil {
		h = func(m jetstream.Msg) { _ = m.Ack() }
	}
	b.ResetTimer()
	cc, err := cons.Consume(func(m jetstream.Msg) { h(m); handled() })
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatalf("consumed %d of %d", count.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	cc.Stop()
	<-cc.Closed()
}
