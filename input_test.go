package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

func TestBadInput(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for _, key := range []string{"", strings.Repeat("k", 1025), "nul\x00key"} {
		_, err := idem.Do(bg, rt, key, idemtest.MustNotRun(t))
		if !errors.Is(err, idem.ErrInvalidKey) {
			t.Fatalf("key %.20q: err = %v, want ErrInvalidKey", key, err)
		}
		if err := rt.Forget(bg, key); !errors.Is(err, idem.ErrInvalidKey) {
			t.Fatalf("Forget(%.20q): %v", key, err)
		}
	}
	if _, err := idem.Do(bg, rt, strings.Repeat("k", 1024), idemtest.Value("longest key")); err != nil {
		t.Fatalf("a 1 KiB key: %v", err)
	}
	if _, err := idem.Do[string](bg, rt, "k", nil); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("nil fn: %v", err)
	}
	if _, err := idem.Do(bg, nil, "k", idemtest.MustNotRun(t)); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("nil runtime: %v", err)
	}
	for name, opt := range map[string]idem.CallOption{
		"WithTTL(0)":       idem.WithTTL(0),
		"WithTTL(-1s)":     idem.WithTTL(-time.Second),
		"WithLease(0)":     idem.WithLease(0),
		"WithLease(-1s)":   idem.WithLease(-time.Second),
		"WithSettle(-1ns)": idem.WithSettle(-1),
		"WithCodec(nil)":   idem.WithCodec(nil),
	} {
		if _, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), opt); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := idem.Do(ctx, rt, "k", idemtest.MustNotRun(t)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]idem.Options{
		"Lease":        {Policy: idem.Policy{Lease: -time.Second}},
		"TTL":          {Policy: idem.Policy{TTL: -1}},
		"Settle":       {Policy: idem.Policy{Settle: -time.Second}},
		"Lease long":   {Policy: idem.Policy{Lease: store.MaxDuration + 1}},
		"FailFast":     {Policy: idem.Policy{FailFast: true, Settle: time.Second}},
		"StoreTimeout": {StoreTimeout: -time.Second},
		"Shards":       {Shards: -1},
		"many shards":  {Shards: 1 << 20},
		"CacheEntries": {CacheEntries: -1},
		"MaxPending":   {MaxPending: -5},
		"MaxBatch":     {MaxBatch: -5},
	} {
		rt, err := idem.New(o)
		if !errors.Is(err, idem.ErrInvalidArgument) || rt != nil {
			t.Fatalf("%s: New = %v, %v; want ErrInvalidArgument", name, rt, err)
		}
		if !strings.Contains(err.Error(), strings.Fields(name)[0]) && name != "many shards" {
			t.Fatalf("%s: error %q does not name the field", name, err)
		}
	}
}

// A value the codec cannot encode is a *CodecError; the function ran, so
// the failure is stored and a retry does not run it again.
func TestUnencodableValue(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	runs := 0
	fn := func(context.Context) (chan int, error) { runs++; return make(chan int), nil }
	for range 2 {
		_, err := idem.Do(bg, rt, "k", fn)
		var ce *idem.CodecError
		if !errors.As(err, &ce) || ce.Op != "encode" || ce.Key != "k" {
			t.Fatalf("err = %v, want an encode *CodecError", err)
		}
	}
	if runs != 1 {
		t.Fatalf("ran %d times, want 1", runs)
	}
}

func TestUndecodableValue(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{DisableCache: true})
	if _, err := idem.Do(bg, rt, "k", idemtest.Value("not a number")); err != nil {
		t.Fatal(err)
	}
	_, err := idem.Do(bg, rt, "k", func(context.Context) (int, error) { return 0, nil })
	var ce *idem.CodecError
	if !errors.As(err, &ce) || ce.Op != "decode" {
		t.Fatalf("err = %v, want a decode *CodecError", err)
	}
}

// A codec that panics is caught like a panic in fn.
func TestPanickingCodec(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	_, err := idem.Do(bg, rt, "k", idemtest.Value("v"), idem.WithCodec(panicCodec{}))
	var pe *idem.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *PanicError", err)
	}
}

type panicCodec struct{}

func (panicCodec) Marshal(any) ([]byte, error) { panic("codec bug") }
func (panicCodec) Unmarshal([]byte, any) error { panic("codec bug") }

func TestOverloaded(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{Shards: 1, MaxPending: 2})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil))
	<-g.Started
	waiter := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
	waitersAre(t, rt, 1)
	_, err := idem.Do(bg, rt, "other", idemtest.MustNotRun(t))
	if !errors.Is(err, idem.ErrOverloaded) {
		t.Fatalf("third pending call: %v, want ErrOverloaded", err)
	}
	close(g.Open)
	idemtest.Recv(t, owner)
	idemtest.Recv(t, waiter)
	if _, err := idem.Do(bg, rt, "other", idemtest.Value("fine")); err != nil {
		t.Fatalf("after the load: %v", err)
	}
}

func TestForget(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	if _, err := idem.Do(bg, rt, "k", idemtest.Value("v1")); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(bg, "k"); err != nil {
		t.Fatal(err)
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.Value("v2")); err != nil || v != "v2" {
		t.Fatalf("after Forget: %q %v; want a new run", v, err)
	}
	if err := rt.Forget(bg, "never-used"); err != nil {
		t.Fatalf("Forget of an unknown key: %v", err)
	}
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rt, "busy", g.Fn("v", nil))
	<-g.Started
	if err := rt.Forget(bg, "busy"); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("Forget of a key in progress: %v, want ErrConflict", err)
	}
	close(g.Open)
	idemtest.Recv(t, owner)
}
