package sqs_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/sqs"
)

// benchBatch is how many messages each round drains.
const benchBatch = 200

// BenchmarkThroughput drains rounds of benchBatch keyed messages with a
// no-op handler, through a plain receive/delete loop and through the
// adapter's Run (in-memory idem store), one after the other, ten messages
// at a time each, and reports both rates and their ratio. Against goaws,
// in-process: the emulator's costs (XML, its global lock) weigh on both
// and are nothing like SQS's network round trips.
func BenchmarkThroughput(b *testing.B) {
	var plain, withIdem time.Duration
	for i := 0; b.Loop(); i++ {
		// A queue per round: a long poll that a stopped consumer left
		// behind in the emulator can still take a message of the queue.
		b.StopTimer()
		e := newEnv(b, 30, nil)
		fill(b, e, fmt.Sprintf("p%d-", i))
		b.StartTimer()
		start := time.Now()
		plainDrain(b, e)
		plain += time.Since(start)

		b.StopTimer()
		e = newEnv(b, 30, nil)
		fill(b, e, fmt.Sprintf("i%d-", i))
		b.StartTimer()
		start = time.Now()
		idemDrain(b, e)
		withIdem += time.Since(start)
	}
	n := float64(b.N * benchBatch)
	b.ReportMetric(n/plain.Seconds(), "plain-msgs/s")
	b.ReportMetric(n/withIdem.Seconds(), "idem-msgs/s")
	b.ReportMetric(plain.Seconds()/withIdem.Seconds(), "idem/plain")
}

// fill sends benchBatch messages keyed prefix<n>, eight senders at once.
func fill(b *testing.B, e *env, prefix string) {
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < benchBatch; i += 8 {
				e.send(b, fmt.Sprintf("%s%d", prefix, i), "x")
			}
		})
	}
	wg.Wait()
}

func noop(context.Context, *sqs.Message) error { return nil }

// plainDrain is the loop a consumer without idem runs: receive up to ten,
// handle and delete each on its own goroutine, until benchBatch are done.
func plainDrain(b *testing.B, e *env) {
	ctx := context.Background()
	done := 0
	for done < benchBatch {
		out, err := e.cl.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: &e.url, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, m := range out.Messages {
			wg.Go(func() {
				_ = noop(ctx, &sqs.Message{Msg: m})
				if _, err := e.cl.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: &e.url,
					ReceiptHandle: m.ReceiptHandle}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		done += len(out.Messages)
	}
}

// idemDrain runs the adapter until benchBatch messages are answered.
func idemDrain(b *testing.B, e *env) {
	rt, err := idem.New(idem.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(context.Background())
	c, err := consume.New(consume.Options{Runtime: rt, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	var answered atomic.Int32
	all := make(chan struct{})
	a, err := sqs.New(sqs.Options{Consumer: c, Client: e.cl, QueueURL: e.url, Handler: noop, Logger: quiet,
		WaitTime: time.Second, Concurrency: 10,
		OnVerdict: func(_ *sqs.Message, v consume.Verdict, err error) {
			if v.Decision != consume.Ack || err != nil {
				b.Errorf("verdict %v, answer %v", v.Decision, err)
			}
			if answered.Add(1) == benchBatch {
				close(all)
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	<-all
	cancel()
	<-done
}
