package sqs_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/sqs"
	"github.com/idemrt/idem/internal/idemtest"
)

// batchClient hands Run one batch of messages, as SQS does with several
// messages of one FIFO message group (goaws returns one per group), and
// then nothing: later receives wait for their context. Deletes and
// visibility changes go to the emulator, through the recorder.
type batchClient struct {
	*recorder
	mu    sync.Mutex
	batch []types.Message
}

func (b *batchClient) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, _ ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	b.mu.Lock()
	batch := b.batch
	b.batch = nil
	b.mu.Unlock()
	if batch != nil && int(in.MaxNumberOfMessages) >= len(batch) {
		return &awssqs.ReceiveMessageOutput{Messages: batch}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// fifoBatch sends one message per key to e's queue, receives them all and
// gives each the MessageGroupId of groups (by index), as a FIFO queue's
// receive would.
func fifoBatch(t *testing.T, e *env, keys, groups []string) []types.Message {
	t.Helper()
	for _, k := range keys {
		e.send(t, k, "body of "+k)
	}
	byKey := map[string]types.Message{}
	for len(byKey) < len(keys) {
		m, ok := e.receive(t)
		if !ok {
			t.Fatalf("received %d of %d messages", len(byKey), len(keys))
		}
		byKey[*m.MessageAttributes[sqs.KeyAttribute].StringValue] = m
	}
	var batch []types.Message
	for i, k := range keys {
		m := byKey[k]
		m.Attributes = map[string]string{
			string(types.MessageSystemAttributeNameMessageGroupId):          groups[i],
			string(types.MessageSystemAttributeNameApproximateReceiveCount): "1",
			string(types.MessageSystemAttributeNameSequenceNumber):          strconv.Itoa(i + 1),
		}
		batch = append(batch, m)
	}
	return batch
}

// On a FIFO queue, a message of a group that is given back (a transient
// error) holds back the messages after it in its group: one received in
// the same batch does not run, and is given back too, so that it comes
// after the retry and not before it.
func TestFIFORetryHoldsBackItsGroup(t *testing.T) {
	e := newEnv(t, 30, nil)
	rec := newRecorder(e.cl)
	var delMu sync.Mutex
	var deleted int
	rec.onDelete = func(*awssqs.DeleteMessageInput) {
		delMu.Lock()
		deleted++
		delMu.Unlock()
	}
	cl := &batchClient{recorder: rec, batch: fifoBatch(t, e, []string{"a", "b"}, []string{"g", "g"})}
	l := newLedger()
	a := e.adapter(t, sqs.Options{Client: cl, OnVerdict: l.onVerdict,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			l.effect(m.Key)
			if m.Key == "a" {
				return errors.New("the payment service is down")
			}
			return nil
		}})
	run(t, a)
	idemtest.Eventually(t, "both messages answered", func() bool {
		return len(l.decisions("a")) == 1 && len(l.decisions("b")) == 1
	})
	if d := l.decisions("a"); d[0] != consume.Retry {
		t.Errorf("a: decisions %v, want [retry]", d)
	}
	if n := l.count("b"); n != 0 {
		t.Errorf("b ran %d times while a, before it in its group, was given back; want 0", n)
	}
	if d := l.decisions("b"); d[0] != consume.Retry {
		t.Errorf("b: decisions %v, want [retry]", d)
	}
	l.mu.Lock()
	if err := l.verdicts["b"][0].Err; !errors.Is(err, sqs.ErrGroupHeldBack) {
		t.Errorf("b: verdict error %v, want ErrGroupHeldBack", err)
	}
	l.mu.Unlock()
	delMu.Lock()
	defer delMu.Unlock()
	if deleted != 0 {
		t.Errorf("%d deletes, want none", deleted)
	}
}

// On a FIFO queue, the messages of one group in a batch run one after the
// other, in order; those of other groups run meanwhile.
func TestFIFOGroupRunsInOrder(t *testing.T) {
	e := newEnv(t, 30, nil)
	cl := &batchClient{recorder: newRecorder(e.cl),
		batch: fifoBatch(t, e, []string{"a", "b", "c"}, []string{"g", "g", "other"})}
	var mu sync.Mutex
	var events []string
	note := func(s string) {
		mu.Lock()
		events = append(events, s)
		mu.Unlock()
	}
	bStarted, cStarted := make(chan struct{}), make(chan struct{})
	l := newLedger()
	a := e.adapter(t, sqs.Options{Client: cl, OnVerdict: l.onVerdict,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			note("start " + m.Key)
			defer note("end " + m.Key)
			switch m.Key {
			case "a":
				// Another group runs meanwhile.
				select {
				case <-cStarted:
				case <-time.After(idemtest.Timeout):
					t.Error("c, of another group, did not run while a ran")
				}
				// b, after a in its group, must not start before a ends:
				// give it the time to show that it does.
				select {
				case <-bStarted:
				case <-time.After(300 * time.Millisecond):
				}
			case "b":
				close(bStarted)
			case "c":
				close(cStarted)
			}
			return nil
		}})
	run(t, a)
	idemtest.Eventually(t, "every message deleted and reported", func() bool {
		return e.count(t) == 0 && len(l.decisions("a"))+len(l.decisions("b"))+len(l.decisions("c")) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	at := map[string]int{}
	for i, ev := range events {
		at[ev] = i
	}
	if at["start b"] < at["end a"] {
		t.Errorf("events %v: b started before a, before it in its group, ended", events)
	}
}

// A FIFO queue with DeduplicationScope messageGroup (high throughput
// mode) deduplicates within a message group only: two messages of two
// groups under one MessageDeduplicationId are two messages, and each
// runs. A retried send of one (same group, same id) still runs once.
func TestDeduplicationIDKeyedWithinItsGroup(t *testing.T) {
	e := newEnv(t, 5, nil)
	l := newLedger()
	a := e.adapter(t, sqs.Options{Handler: func(ctx context.Context, m *sqs.Message) error {
		l.effect(m.Key)
		return nil
	}})
	var keys []string
	for _, group := range []string{"tenant-1", "tenant-2", "tenant-1"} {
		e.send(t, "", "x")
		m, ok := e.receive(t)
		if !ok {
			t.Fatal("no message")
		}
		m.Attributes = map[string]string{
			string(types.MessageSystemAttributeNameMessageGroupId):         group,
			string(types.MessageSystemAttributeNameMessageDeduplicationId): "invoice-7",
		}
		v, err := a.Process(testCtx(t), m)
		if err != nil || v.Decision != consume.Ack {
			t.Fatalf("Process: %v, %v; want ack", v, err)
		}
		keys = append(keys, sqs.DeduplicationID(m))
	}
	if keys[0] == keys[1] || keys[0] != keys[2] {
		t.Errorf("DeduplicationID keys %q: want the two groups' apart, one group's the same", keys)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.effects) != 2 {
		t.Errorf("effects %v: want one per group", l.effects)
	}
	for k, n := range l.effects {
		if n != 1 {
			t.Errorf("%q: %d effects, want 1", k, n)
		}
	}
}

// A FIFO message waiting for the one before it in its group is kept
// invisible meanwhile, as a running one is: it is not handed to another
// consumer while it waits its turn.
func TestFIFOWaitingMessageKeptInvisible(t *testing.T) {
	e := newEnv(t, 2, nil)
	rec := newRecorder(e.cl)
	batch := fifoBatch(t, e, []string{"a", "b"}, []string{"g", "g"})
	bHandle := *batch[1].ReceiptHandle
	var mu sync.Mutex
	var bExtensions int
	rec.onVisible = func(in *awssqs.ChangeMessageVisibilityInput) {
		mu.Lock()
		if *in.ReceiptHandle == bHandle && in.VisibilityTimeout > 0 {
			bExtensions++
		}
		mu.Unlock()
	}
	l := newLedger()
	a := e.adapter(t, sqs.Options{Client: &batchClient{recorder: rec, batch: batch}, Extend: 400 * time.Millisecond,
		OnVerdict: l.onVerdict,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			if m.Key != "a" {
				return nil
			}
			// a runs for two visibility timeouts (an extension of b
			// every fifth of one).
			deadline := time.Now().Add(idemtest.Timeout)
			for time.Now().Before(deadline) {
				mu.Lock()
				n := bExtensions
				mu.Unlock()
				if n >= 10 {
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return errors.New("b was not kept invisible while it waited")
		}})
	run(t, a)
	idemtest.Eventually(t, "both messages deleted and reported", func() bool {
		return e.count(t) == 0 && len(l.decisions("a")) == 1 && len(l.decisions("b")) == 1
	})
	if d := l.decisions("a"); d[0] != consume.Ack {
		t.Errorf("a: decisions %v, want [ack]", d)
	}
}
