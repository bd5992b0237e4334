package natsjs_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// sharedAdapter returns an adapter on a runtime of its own over st, as a
// consumer process of its own would have.
func sharedAdapter(t *testing.T, st *memstore.Store, co consume.Options, o natsjs.Options) *natsjs.Adapter {
	t.Helper()
	co.Runtime = idemtest.Runtime(t, idem.Options{Store: st, Policy: idem.Policy{Lease: 10 * time.Second}})
	co.Logger = slog.New(slog.DiscardHandler)
	c, err := consume.New(co)
	if err != nil {
		t.Fatal(err)
	}
	o.Consumer, o.AckWait, o.Logger = c, time.Second, slog.New(slog.DiscardHandler)
	a, err := natsjs.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A delivery whose key a run in another process holds past Settle is naked
// after what the holder's lease has left, not after MinDelay: sooner, and
// it would come back only to wait again.
func TestHeldElsewhereNaksAfterTheLeaseLeft(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	holder := sharedAdapter(t, st, consume.Options{}, natsjs.Options{})
	var got consume.Verdict
	other := sharedAdapter(t, st, consume.Options{Policy: idem.Policy{Settle: 20 * time.Millisecond}, MinDelay: 50 * time.Millisecond},
		natsjs.Options{OnVerdict: func(_ *natsjs.Message, v consume.Verdict, _ error) { got = v }})
	g := idemtest.NewGate()
	release := sync.OnceFunc(func() { close(g.Open) })
	t.Cleanup(release) // before the runtimes close, which wait for the run
	done := make(chan consume.Verdict, 1)
	go func() {
		v, _ := holder.Process(context.Background(), newFake("m", 1), func(ctx context.Context, _ *natsjs.Message) error {
			_, err := g.Fn("", nil)(ctx)
			return err
		})
		done <- v
	}()
	idemtest.Recv(t, g.Started)
	m := newFake("m", 2)
	other.Process(context.Background(), m, func(context.Context, *natsjs.Message) error {
		t.Error("ran while held elsewhere")
		return nil
	})
	// The lease is 10s: what it has left, well above MinDelay.
	if got.Decision != consume.Retry || got.Delay < 5*time.Second || got.Delay > 10*time.Second {
		t.Fatalf("verdict %+v, want a retry after the holder's lease left (about 10s)", got)
	}
	if a := m.Answers(); len(a) == 0 || a[len(a)-1] != "nak "+got.Delay.String() {
		t.Fatalf("answers %q, want a nak after %v", a, got.Delay)
	}
	release()
	if v := idemtest.Recv(t, done); v.Decision != consume.Ack {
		t.Fatalf("holder: %+v", v)
	}
}

// Message ids idem cannot take as they are (2000 bytes, a NUL byte) run
// once, under a digest, and their redeliveries replay.
func TestUnusableMessageIDsRunOnce(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{})
	runs := map[string]int{}
	h := func(_ context.Context, m *natsjs.Message) error { runs[m.Key]++; return nil }
	for _, id := range []string{strings.Repeat("k", 2000), "a\x00b"} {
		for delivered := uint64(1); delivered <= 2; delivered++ {
			m := newFake(id, delivered)
			v, _ := a.Process(context.Background(), m, h)
			if a := m.Answers(); len(a) != 1 || a[0] != "ack" || !strings.Contains(v.Key, "%sha256:") {
				t.Fatalf("delivery %d of a %d-byte id: answers %q, key %q", delivered, len(id), a, v.Key)
			}
		}
		if runs[id] != 1 {
			t.Fatalf("a %d-byte id ran %d times, want 1", len(id), runs[id])
		}
	}
}
