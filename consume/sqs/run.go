package sqs

import (
	"context"
	"fmt"
	"sync"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
)

// maxBatch is the most messages one ReceiveMessage returns.
const maxBatch = 10

// Receive-error backoff: doubled per failure in a row, from the first to
// the last.
const (
	firstReceiveBackoff = 100 * time.Millisecond
	lastReceiveBackoff  = 10 * time.Second
)

// Run receives the queue's messages by long polling (ReceiveMessage with
// Options.WaitTime, the VisibilityTimeout, every message attribute and
// system attribute) and processes each on its own goroutine as [Adapter.Process]
// does, at most Options.Concurrency at once: it asks for no more messages
// than it has room for. A failed receive is logged and tried again after
// a backoff (100ms doubled per failure in a row, at most 10s).
//
// Run returns ctx's error once ctx has ended and every message in flight
// has been answered: those whose handler had not finished are given back
// after the backoff, and their handlers go on detached, storing their
// results for the next receive to replay. Stop Run before closing the
// idem runtime. A nil adapter, or one not built by [New], is an error
// matching idem.ErrInvalidArgument.
func (a *Adapter) Run(ctx context.Context) error {
	if a == nil || a.o.Consumer == nil {
		return fmt.Errorf("sqs: Run on an adapter nil or not built by New: %w", idem.ErrInvalidArgument)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	slots := make(chan struct{}, a.o.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	failures := 0
	for {
		// One free slot, waited for; then as many more as are free.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		n := 1
	more:
		for n < maxBatch {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		at := time.Now()
		out, err := a.o.Client.ReceiveMessage(ctx, a.receiveInput(n))
		var msgs []types.Message
		if err == nil {
			msgs = out.Messages[:min(len(out.Messages), n)]
		}
		for range n - len(msgs) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failures++
			a.o.Logger.Warn("sqs: receiving messages failed", "queue", a.o.QueueURL, "failures", failures, "error", err)
			if !sleep(ctx, receiveBackoff(failures)) {
				return ctx.Err()
			}
			continue
		}
		failures = 0
		for _, m := range msgs {
			wg.Go(func() {
				defer func() { <-slots }()
				_, _ = a.process(ctx, m, at)
			})
		}
	}
}

// receiveInput asks for n messages with all their attributes.
func (a *Adapter) receiveInput(n int) *awssqs.ReceiveMessageInput {
	return &awssqs.ReceiveMessageInput{
		QueueUrl:                    &a.o.QueueURL,
		MaxNumberOfMessages:         int32(n),
		WaitTimeSeconds:             seconds(a.o.WaitTime),
		VisibilityTimeout:           seconds(a.o.VisibilityTimeout),
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
	}
}

// receiveBackoff is the wait after the failures-th failed receive in a row.
func receiveBackoff(failures int) time.Duration {
	d := firstReceiveBackoff
	for i := 1; i < failures && d < lastReceiveBackoff; i++ {
		d *= 2
	}
	return min(d, lastReceiveBackoff)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
