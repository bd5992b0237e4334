package natsjs_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
)

// fakeAdapter returns an adapter on a new in-memory runtime.
func fakeAdapter(t *testing.T, o natsjs.Options) (*natsjs.Adapter, *idem.Runtime) {
	t.Helper()
	rt := idemtest.Runtime(t, idem.Options{})
	c, err := consume.New(consume.Options{Runtime: rt, MinDelay: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	o.Consumer = c
	if o.Conn == nil {
		o.Conn = serverVersion("2.15.3") // one that honours a Term's reason
	}
	if o.AckWait == 0 {
		o.AckWait = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	a, err := natsjs.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a, rt
}

func TestAnswers(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{})
	ok := func(context.Context, *natsjs.Message) error { return nil }
	for _, tc := range []struct {
		name string
		id   string
		h    natsjs.HandlerFunc
		want []string
	}{
		{"done", "m1", ok, []string{"ack"}},
		{"replay", "m1", ok, []string{"ack"}},
		{"transient", "m2", func(context.Context, *natsjs.Message) error { return errors.New("down") }, []string{"nak 50ms"}},
		{"permanent", "m3", func(context.Context, *natsjs.Message) error { return idem.Permanent(errors.New("declined")) },
			[]string{"term idem: declined"}},
		{"permanent replayed", "m3", ok, []string{"term idem: declined"}},
		{"no key", "", ok, []string{"term idem: " + consume.ErrNoKey.Error()}},
		{"nil handler", "m4", nil, []string{"nak 30s"}},
	} {
		m := newFake(tc.id, 1)
		if _, err := a.Process(context.Background(), m, tc.h); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if got := m.Answers(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: answers %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLongTermReasonIsCut(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{})
	m := newFake("m", 1)
	a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error {
		return idem.Permanent(errors.New(strings.Repeat("x", 1000)))
	})
	if got := m.Answers(); len(got) != 1 || len(got[0]) != len("term ")+256 {
		t.Fatalf("answers %q", got)
	}
}

func TestTermReasonIsCutAtARuneBoundary(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{})
	m := newFake("m", 1)
	a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error {
		return idem.Permanent(errors.New("x" + strings.Repeat("é", 300)))
	})
	got := m.Answers()
	if len(got) != 1 {
		t.Fatalf("answers %q", got)
	}
	r := strings.TrimPrefix(got[0], "term ")
	if !utf8.ValidString(r) || len(r) > 256 || len(r) < 255 {
		t.Fatalf("reason of %d bytes (valid UTF-8: %v), want 255 or 256 bytes cut at a rune", len(r), utf8.ValidString(r))
	}
}

func TestAckOnlyAfterTheResultIsStored(t *testing.T) {
	a, rt := fakeAdapter(t, natsjs.Options{})
	m := newFake("m", 1)
	var status idem.KeyStatus
	m.onAnswer = func(string) {
		st, err := rt.State(context.Background(), "consume:S/c:m")
		if err != nil {
			t.Error(err)
		}
		status = st.Status
	}
	a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error { return nil })
	if status != idem.KeyCompleted || !slices.Equal(m.Answers(), []string{"ack"}) {
		t.Fatalf("the key was %v when the message was answered %q", status, m.Answers())
	}
}

func TestShutdownNaksAfterTheBackoffAndNeverAcks(t *testing.T) {
	a, rt := fakeAdapter(t, natsjs.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	m := newFake("m", 1)
	g := idemtest.NewGate()
	done := make(chan consume.Verdict, 1)
	go func() {
		v, _ := a.Process(ctx, m, func(ctx context.Context, _ *natsjs.Message) error {
			_, err := g.Fn("", nil)(ctx)
			return err
		})
		done <- v
	}()
	idemtest.Recv(t, g.Started)
	cancel()
	v := idemtest.Recv(t, done)
	if v.Decision != consume.Retry || !slices.Equal(m.Answers(), []string{"nak 50ms"}) {
		t.Fatalf("verdict %v, answers %q; want a nak after MinDelay", v.Decision, m.Answers())
	}
	close(g.Open)
	// The handler finishes detached and stores its result: the
	// redelivery replays it.
	idemtest.Eventually(t, "the result stored", func() bool {
		st, err := rt.State(context.Background(), v.Key)
		return err == nil && st.Status == idem.KeyCompleted
	})
	m2 := newFake("m", 2)
	v, _ = a.Process(context.Background(), m2, func(context.Context, *natsjs.Message) error {
		t.Error("the handler ran again")
		return nil
	})
	if v.Outcome != idem.Replayed || !slices.Equal(m2.Answers(), []string{"ack"}) {
		t.Fatalf("redelivery: %v/%v, %q", v.Decision, v.Outcome, m2.Answers())
	}
}

// A running handler's message is reported in progress, and never after
// its answer. (How many reports depends on scheduling: at least one.)
func TestInProgressWhileRunningOnly(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{AckWait: 300 * time.Millisecond, Progress: 20 * time.Millisecond})
	m := newFake("m", 1)
	a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error {
		time.Sleep(200 * time.Millisecond)
		return nil
	})
	time.Sleep(100 * time.Millisecond) // a report after the answer would show
	progressThenAck(t, m.Answers())
}

// progressThenAck fails the test unless answers are one or more progress
// reports and then one ack.
func progressThenAck(t *testing.T, answers []string) {
	t.Helper()
	n := len(answers)
	if n < 2 || answers[n-1] != "ack" {
		t.Fatalf("answers %q, want progress reports, then ack last", answers)
	}
	for _, s := range answers[:n-1] {
		if s != "progress" {
			t.Fatalf("answers %q, want progress reports, then ack last", answers)
		}
	}
}

// A delivery that waits for a duplicate in flight is kept in progress too,
// though its handler never runs.
func TestWaitingDuplicateIsKeptInProgress(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{AckWait: 300 * time.Millisecond, Progress: 20 * time.Millisecond})
	g := idemtest.NewGate()
	first := make(chan consume.Verdict, 1)
	go func() {
		v, _ := a.Process(context.Background(), newFake("m", 1), func(ctx context.Context, _ *natsjs.Message) error {
			_, err := g.Fn("", nil)(ctx)
			return err
		})
		first <- v
	}()
	idemtest.Recv(t, g.Started)
	time.AfterFunc(500*time.Millisecond, func() { close(g.Open) })
	dup := newFake("m", 1)
	v, _ := a.Process(context.Background(), dup, func(context.Context, *natsjs.Message) error {
		t.Error("the duplicate ran")
		return nil
	})
	if v.Outcome != idem.Joined {
		t.Fatalf("duplicate: %+v, want it joined to the run in flight", v)
	}
	progressThenAck(t, dup.Answers())
	if v := idemtest.Recv(t, first); v.Decision != consume.Ack {
		t.Fatalf("first delivery: %+v", v)
	}
}

func TestDoubleAck(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{DoubleAck: true})
	m := newFake("m", 1)
	a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error { return nil })
	if got := m.Answers(); !slices.Equal(got, []string{"doubleack"}) {
		t.Fatalf("answers %q", got)
	}
}

func TestFingerprintRefusesAReusedIDForOtherData(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{Fingerprint: true})
	var runs int
	h := func(context.Context, *natsjs.Message) error { runs++; return nil }
	m := newFake("m", 1)
	a.Process(context.Background(), m, h)
	same := newFake("m", 1)
	a.Process(context.Background(), same, h)
	other := newFake("m", 1)
	other.data = []byte("another payload")
	v, _ := a.Process(context.Background(), other, h)
	if runs != 1 || !slices.Equal(same.Answers(), []string{"ack"}) || !errors.Is(v.Err, idem.ErrFingerprintMismatch) ||
		len(other.Answers()) != 1 || !strings.HasPrefix(other.Answers()[0], "term ") {
		t.Fatalf("runs %d; same payload %q; other payload %q (%v)", runs, same.Answers(), other.Answers(), v.Err)
	}
}

func TestMessageWithoutMetadataIsNotAnswered(t *testing.T) {
	a, _ := fakeAdapter(t, natsjs.Options{})
	m := newFake("m", 1)
	m.mdErr = errNotJS
	v, err := a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error {
		t.Error("ran")
		return nil
	})
	if !errors.Is(err, errNotJS) || v.Decision != 0 || len(m.Answers()) != 0 {
		t.Fatalf("%v %v %q", v, err, m.Answers())
	}
}

func TestHandlerSeesTheMessage(t *testing.T) {
	var seen *natsjs.Message
	var verdict consume.Verdict
	a, _ := fakeAdapter(t, natsjs.Options{
		Key:       func(m jetstream.Msg) string { return m.Headers().Get("Order") },
		Scope:     func(md *jetstream.MsgMetadata) string { return md.Stream },
		OnVerdict: func(_ *natsjs.Message, v consume.Verdict, _ error) { verdict = v },
	})
	m := newFake("ignored", 3)
	m.header.Set("Order", "o-1")
	a.Handler(context.Background(), func(_ context.Context, msg *natsjs.Message) error {
		seen = msg
		return nil
	})(m)
	if seen == nil || seen.Key != "o-1" || seen.Scope != "S" || seen.IdemKey != "consume:S:o-1" ||
		string(seen.Data()) != "payload" || seen.Subject() != "s.x" || seen.Headers().Get("Order") != "o-1" ||
		seen.Metadata.NumDelivered != 3 || seen.Metadata.Sequence.Stream != 7 || seen.Msg != jetstream.Msg(m) {
		t.Fatalf("handler saw %+v", seen)
	}
	if verdict.Decision != consume.Ack || verdict.Key != "consume:S:o-1" {
		t.Fatalf("verdict %+v", verdict)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	c, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]natsjs.Options{
		"no consumer":       {},
		"negative ack wait": {Consumer: c, AckWait: -1},
		"negative progress": {Consumer: c, Progress: -1},
		"negative timeout":  {Consumer: c, AckTimeout: -1},
		"huge ack wait":     {Consumer: c, AckWait: math.MaxInt64},
		"huge progress":     {Consumer: c, AckWait: math.MaxInt64, Progress: time.Hour},
		"huge timeout":      {Consumer: c, AckTimeout: math.MaxInt64},
		"progress too long": {Consumer: c, AckWait: time.Second, Progress: time.Second},
	} {
		if _, err := natsjs.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := natsjs.ForConsumer(nil, natsjs.Options{Consumer: c}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("ForConsumer(nil): %v", err)
	}
	a, err := natsjs.New(natsjs.Options{Consumer: c})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := a.Process(context.Background(), nil, nil); !errors.Is(err, idem.ErrInvalidArgument) || v.Decision != 0 {
		t.Errorf("Process(nil message): %v %v", v, err)
	}
	var none *natsjs.Adapter
	if _, err := none.Process(context.Background(), newFake("m", 1), nil); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("nil adapter: %v", err)
	}
}
