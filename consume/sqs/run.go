package sqs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// ErrGroupHeldBack is the error of the verdict of a FIFO queue's message
// that Run gave back without running it: a message before it in its
// message group, received in the same batch, was not done with (given
// back for a retry, or left by OnPermanent Leave). It comes back after
// that one.
var ErrGroupHeldBack = errors.New("sqs: a message before it in its FIFO message group is not done with; given back to keep the group's order")

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
// On a FIFO queue, the messages of one message group that a receive
// returns together are processed one after the other, in order; once one
// of them is not done with (given back for a retry, or left by
// OnPermanent Leave), the rest are given back at once without running
// (their verdict a Retry with [ErrGroupHeldBack]), so that they come back
// after it: no message of a group runs before the one ahead of it is done.
// Those receives count toward the redrive policy's maxReceiveCount of the
// messages held back too.
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
		for _, group := range a.inOrder(msgs) {
			wg.Go(func() {
				a.processInOrder(ctx, group, at, func() { <-slots })
			})
		}
	}
}

// inOrder splits a received batch into the runs of messages that must be
// processed one after the other: on a FIFO queue, the messages of each
// message group, in the order received (SQS returns several of a group in
// one batch, in order); every other message alone.
func (a *Adapter) inOrder(msgs []types.Message) [][]types.Message {
	out := make([][]types.Message, 0, len(msgs))
	groups := map[string]int{} // a group's index in out
	for _, m := range msgs {
		g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
		if g == "" || !a.fifo(m) {
			out = append(out, []types.Message{m})
			continue
		}
		if i, ok := groups[g]; ok {
			out[i] = append(out[i], m)
			continue
		}
		groups[g] = len(out)
		out = append(out, []types.Message{m})
	}
	return out
}

// fifo reports whether m is of a FIFO queue: the queue's name ends in
// ".fifo", or m has a SequenceNumber (FIFO queues only give one).
// Standard queues take a MessageGroupId too (fair queues), with no order.
func (a *Adapter) fifo(m types.Message) bool {
	_, seq := m.Attributes[string(types.MessageSystemAttributeNameSequenceNumber)]
	return seq || strings.HasSuffix(a.o.QueueURL, ".fifo")
}

// processInOrder processes msgs, received at at, one after the other,
// calling done after each is answered; those still waiting their turn are
// kept invisible meanwhile. Once one is not done with (given back for a
// retry, or left by OnPermanent Leave), those after it are not run: they
// are given back at once (visibility 0, the verdict a Retry with
// ErrGroupHeldBack), and SQS, which hands out no message of a group while
// one of it is in flight, returns them after it, in order.
func (a *Adapter) processInOrder(ctx context.Context, msgs []types.Message, at time.Time, done func()) {
	deadline := at.Add(a.o.MaxVisibility)
	waiting := make([]*invisible, len(msgs))
	for i := 1; i < len(msgs); i++ {
		waiting[i] = a.keepInvisible(msgs[i], deadline)
	}
	defer func() { // a panic of user code included
		for _, k := range waiting {
			if k != nil {
				k.stop()
			}
		}
	}()
	held := false
	for i, msg := range msgs {
		if held {
			waiting[i].stop()
			a.holdBack(ctx, msg, at)
		} else {
			v, _ := a.process(ctx, msg, at, waiting[i])
			held = !(v.Decision == consume.Ack || v.Decision == consume.Term && a.o.OnPermanent == Delete)
		}
		done()
	}
}

// holdBack gives msg back at once without running it: a message before it
// in its FIFO group was not done with.
func (a *Adapter) holdBack(ctx context.Context, msg types.Message, at time.Time) {
	m := a.message(msg, at)
	v := consume.Verdict{Decision: consume.Retry, Err: ErrGroupHeldBack, Key: m.IdemKey}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.o.AnswerTimeout)
	err := a.setVisibility(actx, msg, 0)
	cancel()
	a.report(m, v, err)
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
