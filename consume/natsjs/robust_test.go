package natsjs_test

import (
	"context"
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
