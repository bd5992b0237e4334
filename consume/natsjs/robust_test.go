package natsjs_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
)

// panicHandler is a slog.Handler that panics on every record: user code
// that consume.Handle calls and cannot vouch for.
type panicHandler struct{ slog.Handler }

func (panicHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (panicHandler) Handle(context.Context, slog.Record) error { panic("logger broke") }

// A panic that goes through Process (here the consumer's logger, warning
// about a message without a key) stops the in-progress reports: the
// message is neither answered nor kept alive, so the server redelivers it
// after AckWait.
func TestPanicInProcessStopsTheProgressReports(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c, err := consume.New(consume.Options{Runtime: rt, Logger: slog.New(panicHandler{})})
	if err != nil {
		t.Fatal(err)
	}
	a, err := natsjs.New(natsjs.Options{Consumer: c, AckWait: 40 * time.Millisecond, Progress: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	m := newFake("", 1)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the logger's panic did not reach the caller")
			}
		}()
		_, _ = a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error { return nil })
	}()
	time.Sleep(60 * time.Millisecond)
	if got := m.Answers(); len(got) != 0 {
		t.Fatalf("answers after a panic: %q, want none (no ack, no progress report)", got)
	}
}

// An adapter over a Consumer not built by consume.New would retry every
// message: New refuses it.
func TestNewRefusesAnUnbuiltConsumer(t *testing.T) {
	if _, err := natsjs.New(natsjs.Options{Consumer: &consume.Consumer{}}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("New with a zero consume.Consumer: %v, want ErrInvalidArgument", err)
	}
}

// An adapter not built by New refuses the message without answering it
// (the server redelivers it after AckWait); it never acknowledges it and
// never panics.
func TestZeroAdapterRefusesTheMessageUnanswered(t *testing.T) {
	m := newFake("m", 1)
	var a natsjs.Adapter
	v, err := a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error { return nil })
	if !errors.Is(err, idem.ErrInvalidArgument) || v.Decision != 0 {
		t.Fatalf("zero adapter: %+v %v, want no decision and ErrInvalidArgument", v, err)
	}
	if got := m.Answers(); len(got) != 0 {
		t.Fatalf("zero adapter answered %q", got)
	}
}

// A nil context is taken for context.Background().
func TestNilContextIsBackground(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{})
	m := newFake("m", 1)
	//nolint:staticcheck // a nil context is the point
	v, err := a.Process(nil, m, func(context.Context, *natsjs.Message) error { return nil })
	if err != nil || v.Decision != consume.Ack {
		t.Fatalf("nil context: %+v %v, want an ack", v, err)
	}
}

// A nil or zero Message answers zero values.
func TestZeroMessageAccessors(t *testing.T) {
	for _, m := range []*natsjs.Message{nil, {}} {
		if m.Data() != nil || m.Subject() != "" || m.Headers() != nil {
			t.Fatalf("%#v: %q %q %v, want zero values", m, m.Data(), m.Subject(), m.Headers())
		}
	}
}
