package consume_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

func TestHeldElsewhereRetriesAfterTheLeaseLeft(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	holder := newConsumer(t, idem.Options{Store: st}, consume.Options{})
	other := newConsumer(t, idem.Options{Store: st}, consume.Options{
		Policy:      idem.Policy{Settle: 20 * time.Millisecond},
		MaxDelay:    time.Minute,
		CallOptions: []idem.CallOption{idem.WithLease(10 * time.Second)},
	})
	g := idemtest.NewGate()
	done := make(chan consume.Verdict, 1)
	go func() {
		_, vd := consume.Handle(context.Background(), holder, delivery("m", 1), g.Fn("v", nil))
		done <- vd
	}()
	idemtest.Recv(t, g.Started)
	var e effect
	// The holder's lease is the runtime's default (60s): the delay is what
	// it has left, clamped to MaxDelay.
	_, vd := consume.Handle(context.Background(), other, delivery("m", 2), e.fn("", nil))
	check(t, vd, consume.Retry, idem.NoOutcome)
	if !errors.Is(vd.Err, idem.ErrConflict) || vd.Delay < 30*time.Second || vd.Delay > time.Minute {
		t.Fatalf("%+v, want a conflict retried after the lease left (about 60s)", vd)
	}
	close(g.Open)
	check(t, idemtest.Recv(t, done), consume.Ack, idem.Executed)
	_, vd = consume.Handle(context.Background(), other, delivery("m", 3), e.fn("", nil))
	check(t, vd, consume.Ack, idem.Replayed)
	e.want(t, 0)
}

func TestHeldHereFailFastClampsTheDelay(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 50 * time.Millisecond, MaxDelay: 2 * time.Second,
		CallOptions: []idem.CallOption{idem.WithFailFast(), idem.WithLease(10 * time.Second)}})
	g := idemtest.NewGate()
	defer close(g.Open)
	go consume.Handle(context.Background(), c, delivery("m", 1), g.Fn("v", nil))
	idemtest.Recv(t, g.Started)
	_, vd := consume.Handle(context.Background(), c, delivery("m", 1), g.Fn("w", nil))
	check(t, vd, consume.Retry, idem.NoOutcome)
	if !errors.Is(vd.Err, idem.ErrConflict) || vd.Delay != 2*time.Second {
		t.Fatalf("%+v, want a conflict retried after MaxDelay", vd)
	}
}

func TestContextEndedRetriesAfterTheBackoff(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 10 * time.Millisecond})
	var e effect
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, vd := consume.Handle(ctx, c, delivery("m", 3), e.fn("", nil))
	check(t, vd, consume.Retry, idem.NoOutcome)
	if vd.Delay != 40*time.Millisecond || !errors.Is(vd.Err, context.Canceled) {
		t.Fatalf("%+v, want a retry after the backoff of attempt 3 (40ms)", vd)
	}
	e.want(t, 0)

	// Ended while the handler runs: a retry (never with no delay), the
	// handler finishes and stores its result, the redelivery replays it.
	ctx, cancel = context.WithCancel(context.Background())
	g := idemtest.NewGate()
	res := make(chan consume.Verdict, 1)
	go func() {
		_, vd := consume.Handle(ctx, c, delivery("m", 1), g.Fn("v", nil))
		res <- vd
	}()
	idemtest.Recv(t, g.Started)
	cancel()
	vd = idemtest.Recv(t, res)
	if vd.Decision != consume.Retry || vd.Delay != 10*time.Millisecond || !errors.Is(vd.Err, context.Canceled) {
		t.Fatalf("cancelled mid-run: %+v, want a retry after MinDelay", vd)
	}
	close(g.Open)
	idemtest.Eventually(t, "the run to store its result", func() bool {
		st, err := c.Runtime().State(context.Background(), vd.Key)
		return err == nil && st.Status == idem.KeyCompleted
	})
	v, vd := consume.Handle(context.Background(), c, delivery("m", 2), e.fn("", nil))
	check(t, vd, consume.Ack, idem.Replayed)
	if v != "v" {
		t.Fatalf("replayed %q", v)
	}
	e.want(t, 0)
}

// A consumer left running on a closed runtime must not spin: each
// redelivery waits the backoff, which grows with the attempt.
func TestClosedRuntimeRetriesAfterTheBackoff(t *testing.T) {
	rt, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consume.New(consume.Options{Runtime: rt, MinDelay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var e effect
	for attempt, want := range map[int]time.Duration{1: 10 * time.Millisecond, 4: 80 * time.Millisecond} {
		_, vd := consume.Handle(context.Background(), c, delivery("m", attempt), e.fn("", nil))
		if vd.Decision != consume.Retry || vd.Delay != want || !errors.Is(vd.Err, idem.ErrClosed) {
			t.Fatalf("attempt %d: %+v, want a retry after %v", attempt, vd, want)
		}
	}
	e.want(t, 0)
}

func TestMissingKeyIsNeverRun(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	term := newConsumer(t, idem.Options{}, consume.Options{Logger: logger})
	retry := newConsumer(t, idem.Options{}, consume.Options{Logger: logger, MissingKey: consume.Retry, MaxDelay: 7 * time.Second})
	var e effect
	_, vd := consume.Handle(context.Background(), term, delivery("", 1), e.fn("", nil))
	if vd.Decision != consume.Term || !errors.Is(vd.Err, consume.ErrNoKey) || vd.Key != "" {
		t.Fatalf("%+v", vd)
	}
	_, vd = consume.Handle(context.Background(), retry, delivery("", 1), e.fn("", nil))
	if vd.Decision != consume.Retry || vd.Delay != 7*time.Second || !errors.Is(vd.Err, consume.ErrNoKey) {
		t.Fatalf("%+v", vd)
	}
	e.want(t, 0)
	if n := strings.Count(logs.String(), "cannot be keyed"); n != 2 {
		t.Fatalf("%d warnings logged, want 2:\n%s", n, logs.String())
	}
}

// Message keys idem cannot take as they are (too long, or holding a NUL
// byte) run under a digest of themselves, once, and their redeliveries
// replay; a scope that leaves no room even for the digest is given up.
func TestUnusableMessageKeysRunUnderADigest(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MissingKey: consume.Retry})
	var e effect
	long, nul := strings.Repeat("k", 2000), "a\x00b"
	seen := map[string]bool{}
	for _, key := range []string{long, long + "x", nul, "a\x00c"} {
		for attempt, out := range []idem.Outcome{idem.Executed, idem.Replayed} {
			_, vd := consume.Handle(context.Background(), c, delivery(key, attempt+1), e.fn("v", nil))
			check(t, vd, consume.Ack, out)
			if !strings.HasPrefix(vd.Key, "consume:S/c%sha256:") || len(vd.Key) != len("consume:S/c%sha256:")+64 {
				t.Fatalf("key %q", vd.Key)
			}
			seen[vd.Key] = true
		}
	}
	e.want(t, 4)
	if len(seen) != 4 {
		t.Fatalf("%d idem keys for 4 message keys", len(seen))
	}
	_, vd := consume.Handle(context.Background(), c, consume.Delivery{Scope: strings.Repeat("s", 2000), Key: "m", Attempt: 1}, e.fn("", nil))
	if vd.Decision != consume.Term || !errors.Is(vd.Err, idem.ErrInvalidKey) {
		t.Fatalf("a scope too long: %+v, want a Term with ErrInvalidKey", vd)
	}
	e.want(t, 4)
}

// A plain message key never produces a digest key, whatever it holds.
func TestDigestKeysMeetNoPlainKey(t *testing.T) {
	long := strings.Repeat("k", 2000)
	digest, err := consume.Key("S", long)
	if err != nil {
		t.Fatal(err)
	}
	hex := digest[len("consume:S%sha256:"):]
	for _, p := range [][2]string{{"S", "%sha256:" + hex}, {"S%sha256", hex}, {"S%sha256:", hex}, {"", "S%sha256:" + hex}} {
		if k, err := consume.Key(p[0], p[1]); err != nil || k == digest {
			t.Errorf("Key(%q, %q) = %q, %v; the digest key is %q", p[0], p[1], k, err, digest)
		}
	}
	if k, _ := consume.Key("T", long); k == digest {
		t.Errorf("two scopes, one digest key %q", k)
	}
}

func TestFingerprintMismatchTerms(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var e effect
	d := delivery("m", 1)
	d.Fingerprint = []byte("payload-1")
	_, vd := consume.Handle(context.Background(), c, d, e.fn("", nil))
	check(t, vd, consume.Ack, idem.Executed)
	d.Fingerprint = []byte("payload-2")
	_, vd = consume.Handle(context.Background(), c, d, e.fn("", nil))
	if vd.Decision != consume.Term || !errors.Is(vd.Err, idem.ErrFingerprintMismatch) {
		t.Fatalf("%+v", vd)
	}
	e.want(t, 1)
}

func TestBadInputNeverPanics(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	_, vd := consume.Handle[int](context.Background(), nil, delivery("m", 1), func(context.Context) (int, error) { return 1, nil })
	if vd.Decision != consume.Retry || !errors.Is(vd.Err, idem.ErrInvalidArgument) || vd.Delay <= 0 {
		t.Fatalf("nil consumer: %+v", vd)
	}
	want, _ := consume.Key("S/c", "m")
	_, vd = consume.Handle[int](context.Background(), c, delivery("m", 1), nil)
	if vd.Decision != consume.Retry || !errors.Is(vd.Err, idem.ErrInvalidArgument) || vd.Delay <= 0 || vd.Key != want {
		t.Fatalf("nil function: %+v, want a retry under key %q", vd, want)
	}
	//nolint:staticcheck // a nil context is the point
	v, vd := consume.Handle(nil, c, delivery("m", 1), func(context.Context) (int, error) { return 1, nil })
	if v != 1 || vd.Decision != consume.Ack {
		t.Fatalf("nil context: %v %+v, want it taken for context.Background()", v, vd)
	}
}

// A Consumer not built by New has no runtime: every delivery, keyed or
// not, is a Retry after DefaultMaxDelay (never a Retry with no delay, the
// hot redelivery loop), and its Runtime is nil, as a nil Consumer's is.
func TestUnbuiltConsumerRetriesAndNeverPanics(t *testing.T) {
	var e effect
	for _, c := range []*consume.Consumer{{}, nil} {
		for _, key := range []string{"m", ""} {
			_, vd := consume.Handle(context.Background(), c, delivery(key, 1), e.fn("", nil))
			if vd.Decision != consume.Retry || vd.Delay != consume.DefaultMaxDelay || !errors.Is(vd.Err, idem.ErrInvalidArgument) {
				t.Fatalf("consumer %p, key %q: %+v, want a retry after DefaultMaxDelay", c, key, vd)
			}
			if want, _ := consume.Key("S/c", key); vd.Key != want {
				t.Fatalf("consumer %p, key %q: verdict key %q, want %q", c, key, vd.Key, want)
			}
		}
		if rt := c.Runtime(); rt != nil {
			t.Fatalf("consumer %p: Runtime() = %v, want nil", c, rt)
		}
	}
	e.want(t, 0)
}

func TestNewRejectsBadOptions(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for name, o := range map[string]consume.Options{
		"no runtime":       {},
		"negative settle":  {Runtime: rt, Policy: idem.Policy{Settle: -1}},
		"negative min":     {Runtime: rt, MinDelay: -1},
		"negative max":     {Runtime: rt, MaxDelay: -time.Second},
		"huge min":         {Runtime: rt, MinDelay: math.MaxInt64},
		"huge max":         {Runtime: rt, MaxDelay: math.MaxInt64},
		"huge settle":      {Runtime: rt, Policy: idem.Policy{Settle: math.MaxInt64}},
		"huge TTL":         {Runtime: rt, Policy: idem.Policy{TTL: math.MaxInt64}},
		"huge lease":       {Runtime: rt, Policy: idem.Policy{Lease: math.MaxInt64}},
		"negative TTL":     {Runtime: rt, Policy: idem.Policy{TTL: -1}},
		"negative lease":   {Runtime: rt, Policy: idem.Policy{Lease: -1}},
		"huge call TTL":    {Runtime: rt, CallOptions: []idem.CallOption{idem.WithTTL(math.MaxInt64)}},
		"min over max":     {Runtime: rt, MinDelay: time.Second, MaxDelay: time.Millisecond},
		"ack without key":  {Runtime: rt, MissingKey: consume.Ack},
		"unknown decision": {Runtime: rt, MissingKey: 9},
	} {
		if _, err := consume.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

// Only one of MinDelay and MaxDelay set: the default of the other gives
// way to it, and New does not fail.
func TestOneDelaySetMovesTheOtherDefault(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	fail := func(context.Context) (int, error) { return 0, errors.New("x") }
	for _, tc := range []struct {
		name       string
		o          consume.Options
		first, big time.Duration // delays at attempt 1 and at a huge attempt
	}{
		{"MaxDelay under the default MinDelay", consume.Options{MaxDelay: 30 * time.Millisecond}, 30 * time.Millisecond, 30 * time.Millisecond},
		{"MinDelay over the default MaxDelay", consume.Options{MinDelay: time.Minute}, time.Minute, time.Minute},
	} {
		tc.o.Runtime = rt
		c, err := consume.New(tc.o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for attempt, want := range map[int]time.Duration{1: tc.first, 1 << 20: tc.big} {
			if _, vd := consume.Handle(context.Background(), c, delivery("m", attempt), fail); vd.Delay != want {
				t.Errorf("%s, attempt %d: delay %v, want %v", tc.name, attempt, vd.Delay, want)
			}
		}
	}
}

func TestBackoffNeverOverflows(t *testing.T) {
	// The longest MaxDelay allowed (math.MaxInt64 is refused by New).
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: time.Millisecond, MaxDelay: store.MaxDuration})
	boom := errors.New("boom")
	var e effect
	prev := time.Duration(0)
	for _, attempt := range []int{1, 2, 10, 40, 62, 63, 64, 100, 1 << 30} {
		_, vd := consume.Handle(context.Background(), c, delivery("m", attempt), e.fn("", boom))
		if vd.Decision != consume.Retry || vd.Delay < prev || vd.Delay <= 0 {
			t.Fatalf("attempt %d: %v %v, want a retry no sooner than %v", attempt, vd.Decision, vd.Delay, prev)
		}
		prev = vd.Delay
	}
	if prev != store.MaxDuration {
		t.Fatalf("attempt 1<<30: delay %v, want MaxDelay", prev)
	}
}
