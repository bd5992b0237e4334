package natsjs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
)

// AckAll and AckNone (ordered) consumers lose retried and terminated
// messages: ForConsumer refuses them and says why.
func TestForConsumerRequiresExplicitAck(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{})
	ctx := testCtx(t)
	c, err := consume.New(consume.Options{Runtime: idemtest.Runtime(t, idem.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []jetstream.AckPolicy{jetstream.AckAllPolicy, jetstream.AckNonePolicy} {
		cons, err := e.js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{Durable: "p" + p.String(), AckPolicy: p})
		if err != nil {
			t.Fatal(err)
		}
		_, err = natsjs.ForConsumer(cons, natsjs.Options{Consumer: c})
		if !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), p.String()) {
			t.Errorf("%v consumer: %v, want ErrInvalidArgument naming the policy", p, err)
		}
	}
	ordered, err := e.js.OrderedConsumer(ctx, streamName, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsjs.ForConsumer(ordered, natsjs.Options{Consumer: c}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("ordered consumer: %v, want ErrInvalidArgument", err)
	}
	if _, err := natsjs.ForConsumer(e.cons, natsjs.Options{Consumer: c}); err != nil {
		t.Errorf("explicit-ack consumer: %v", err)
	}
}

// spinCheck records the verdicts about one message that is never run.
type spinCheck struct {
	mu       sync.Mutex
	verdicts []consume.Verdict
}

func (s *spinCheck) onVerdict(_ *natsjs.Message, v consume.Verdict, _ error) {
	s.mu.Lock()
	s.verdicts = append(s.verdicts, v)
	s.mu.Unlock()
}

// check fails the test unless the message was delivered a few times in the
// second after the first delivery, each naked with a delay.
func (s *spinCheck) check(t *testing.T) {
	t.Helper()
	idemtest.Eventually(t, "a first delivery", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.verdicts) > 0
	})
	time.Sleep(time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	// MinDelay 50ms doubled per delivery: 50+100+200+400ms, so 5.
	if n := len(s.verdicts); n > 6 {
		t.Errorf("%d deliveries in a second, want a handful", n)
	}
	for _, v := range s.verdicts {
		if v.Decision != consume.Retry || v.Delay < 50*time.Millisecond {
			t.Fatalf("verdict %+v, want a retry after at least MinDelay", v)
		}
	}
}

// A consumer left running on a closed runtime does not spin on its
// messages: each redelivery waits the backoff.
func TestClosedRuntimeDoesNotSpin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{ackWait: 5 * time.Second})
	rt, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consume.New(consume.Options{Runtime: rt, MinDelay: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var s spinCheck
	a, err := natsjs.ForConsumer(e.cons, natsjs.Options{Consumer: c, OnVerdict: s.onVerdict, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.consume(t, a.Handler(context.Background(), func(context.Context, *natsjs.Message) error {
		t.Error("ran on a closed runtime")
		return nil
	}))
	e.publish(t, "m1")
	s.check(t)
}

// The same with the consumer's context ended while Consume still runs.
func TestEndedContextDoesNotSpin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{ackWait: 5 * time.Second})
	var s spinCheck
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: s.onVerdict})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.consume(t, a.Handler(ctx, func(context.Context, *natsjs.Message) error {
		t.Error("ran with its context ended")
		return nil
	}))
	e.publish(t, "m1")
	s.check(t)
}
