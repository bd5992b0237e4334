package actors

// A harness that drives one Shard on the test's goroutine, for the white-box
// tests of its per-key state machine (entry_test.go).
//
// Calling the handlers directly is sound because the actor runs every one
// of them on one goroutine and nothing else touches the state it owns; here
// that goroutine is the test's, and the harness makes sure nothing runs on
// another:
//
//   - store operations stop at the group-commit flush (the shard's Committer
//     is replaced) and wait for the test, which answers them, from the store
//     or by hand, and hands the batch to onBatch as a batchDone would;
//   - the shard's messages to itself (its timer ticks) go, through a
//     protoactor process registered in place of the actor, to an inbox that
//     the test drains into the handlers, routed as Receive routes them;
//   - the fake clock runs timer callbacks synchronously inside Advance, on
//     the test's goroutine.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/mailbox"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

var t0 = time.Date(2026, time.January, 1, 12, 0, 0, 0, time.UTC)

type harness struct {
	t       *testing.T
	s       *shard
	clk     *clock.Fake
	mem     *memstore.Store
	inbox   *inbox
	logs    *logRecorder
	batch   []*op // the store batch out, nil when none
	flushed int64 // operations flushed in batches so far
}

// batchedStore hides memstore's store.InProcess mark, so that the shard
// sends its operations through the group-commit batcher, where the harness
// holds them.
type batchedStore struct{ store.Store }

// inbox stands in for the shard's actor: it keeps what the shard sends
// itself.
type inbox struct {
	mu   sync.Mutex
	msgs []any
}

func (b *inbox) SendUserMessage(_ *actor.PID, m any) {
	b.mu.Lock()
	b.msgs = append(b.msgs, m)
	b.mu.Unlock()
}
func (b *inbox) SendSystemMessage(*actor.PID, any) {}
func (b *inbox) Stop(*actor.PID)                   {}

func (b *inbox) take() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.msgs
	b.msgs = nil
	return m
}

// logRecorder keeps the shard's log lines.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(level slog.Level) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level {
			n++
		}
	}
	return n
}

type harnessOpt func(*Config)

// inline gives the shard memstore itself: operations run inside the
// handler that submits them.
func inline(c *Config) { c.Store = c.Store.(batchedStore).Store }

// waker makes the shard believe its store wakes waiters.
func waker(c *Config) { c.wakerID = "waker-1" }

// newHarness returns a shard over a memstore, both reading a fake clock at
// t0. Claim owners are "owner-1", "owner-2", … in claim order.
func newHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, clk: clock.NewFake(t0), inbox: new(inbox), logs: new(logRecorder)}
	h.mem = memstore.New(memstore.Options{Clock: h.clk})
	owners := 0
	cfg := &Config{
		Store:  batchedStore{h.mem},
		Clock:  h.clk,
		Logger: slog.New(h.logs),
		newOwner: func() string {
			owners++
			return "owner-" + strconv.Itoa(owners)
		},
	}
	for _, o := range opts {
		o(cfg)
	}
	s := newShard(cfg)
	// Batches stop at the harness, which holds them: partition 0's worker
	// is never used.
	p := &partition{io: mailbox.NewWorker()}
	p.io.Stop()
	p.commit = mailbox.NewCommitter(cfg.MaxBatch, func(b []*op) {
		if h.batch != nil {
			t.Fatalf("a second batch was flushed while one is out")
		}
		h.batch = b
		h.flushed += int64(len(b))
	})
	s.parts = map[int]*partition{0: p}
	sys := newActorSystem(nil)
	pid, ok := sys.sys.ProcessRegistry.Add(h.inbox, "shard-under-test")
	if !ok {
		t.Fatal("could not register the test inbox")
	}
	s.root, s.pid = sys.sys.Root, pid
	h.s = s
	t.Cleanup(func() {
		if s.armed != nil {
			s.armed.Stop()
		}
		sys.shutdown()
		if n := h.logs.count(slog.LevelError); n > 0 {
			t.Errorf("the shard logged %d errors (a reply channel full, or a recovered panic)", n)
		}
	})
	return h
}

// request builds a request for key: a 10s lease, a 1h TTL, and a caller
// that waits as long as it takes, unless mods say otherwise.
func request(key string, mods ...func(*Request)) *Request {
	r := &Request{Key: key, Lease: 10 * time.Second, TTL: time.Hour, Settle: forever,
		Reply: make(chan Reply, 1)} // one reply per phase, as in production
	for _, m := range mods {
		m(r)
	}
	return r
}

func settle(d time.Duration) func(*Request) { return func(r *Request) { r.Settle = d } }
func lease(d time.Duration) func(*Request)  { return func(r *Request) { r.Lease = d } }
func ttl(d time.Duration) func(*Request)    { return func(r *Request) { r.TTL = d } }
func fp(s string) func(*Request)            { return func(r *Request) { r.Fingerprint = []byte(s) } }
func noRenew(r *Request)                    { r.NoRenew = true }

// ask sends a new request for key to the shard.
func (h *harness) ask(key string, mods ...func(*Request)) *Request {
	r := request(key, mods...)
	h.s.onRequest(r)
	return r
}

// finish hands the shard r's Finish, as the owner does when fn returns.
func (h *harness) finish(r *Request, kind Kind, err error) {
	f := &r.Finish
	*f = Finish{Req: r, Kind: kind, Err: err}
	if kind == Success {
		f.Record, f.Value = store.Record{Value: []byte(`"v"`)}, "v"
	}
	h.s.onFinish(f)
}

// cancelFunc is a function as a run's canceler.
type cancelFunc func(error)

func (f cancelFunc) CancelRun(cause error) { f(cause) }

// watch publishes a cancel function for r's run and returns what it was
// called with, if anything, at the time of the call.
func watch(r *Request) func() error {
	var mu sync.Mutex
	var cause error
	r.SetCanceler(cancelFunc(func(c error) {
		mu.Lock()
		defer mu.Unlock()
		if cause == nil {
			cause = c
		}
	}))
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		return cause
	}
}

// op returns the one operation out, which must be of kind k.
func (h *harness) op(k store.OpKind) *op {
	h.t.Helper()
	if len(h.batch) != 1 {
		h.t.Fatalf("store operations out = %d, want 1 %v", len(h.batch), k)
	}
	if o := h.batch[0]; o.Kind != k {
		h.t.Fatalf("store operation out = %v, want %v", o.Kind, k)
	}
	return h.batch[0]
}

func (h *harness) noOp() {
	h.t.Helper()
	if len(h.batch) != 0 {
		h.t.Fatalf("store operations out = %d (first %v), want none", len(h.batch), h.batch[0].Kind)
	}
}

// runStore runs the batch out on the store, without answering the shard.
func (h *harness) runStore() {
	h.t.Helper()
	if h.batch == nil {
		h.t.Fatal("no store batch out")
	}
	for _, o := range h.batch {
		store.RunOne(context.Background(), h.mem, &o.Op)
	}
}

// deliver answers the shard with the batch out, as its batchDone would.
func (h *harness) deliver() {
	h.t.Helper()
	b := h.batch
	if b == nil {
		h.t.Fatal("no store batch out")
	}
	h.batch = nil // onBatch may flush the next one
	h.s.onBatch(&batchDone{part: h.s.parts[0], ops: b})
}

// run runs the batch out on the store and answers the shard.
func (h *harness) run() {
	h.t.Helper()
	h.runStore()
	h.deliver()
}

// fail answers the batch out with err for every operation, as a store that
// failed before it did anything.
func (h *harness) fail(err error) {
	h.t.Helper()
	for _, o := range h.batch {
		o.Err = err
	}
	h.deliver()
}

// advance moves the fake clock and hands the shard the ticks it sent
// itself meanwhile.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	for {
		msgs := h.inbox.take()
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			switch m := m.(type) {
			case *tick:
				h.s.onTick(m)
			default:
				h.t.Fatalf("the shard sent itself an unexpected %T", m)
			}
		}
	}
}

// advanceTo moves the fake clock to at.
func (h *harness) advanceTo(at time.Time) {
	h.t.Helper()
	if d := at.Sub(h.clk.Now()); d > 0 {
		h.advance(d)
	}
}

func (h *harness) entry(key string) *keyState {
	h.t.Helper()
	e := h.s.entries[key]
	if e == nil {
		h.t.Fatalf("no entry for %q", key)
	}
	return e
}

func (h *harness) wantPhase(key string, want phase) *keyState {
	h.t.Helper()
	e := h.entry(key)
	if e.phase != want {
		h.t.Fatalf("phase of %q = %s, want %s", key, phaseName(e.phase), phaseName(want))
	}
	return e
}

// wantCounts checks the shard's counters of entries and parked callers
// against its state.
func (h *harness) wantCounts(entries, waiters int) {
	h.t.Helper()
	if got := h.s.nEntries.Load(); got != int64(entries) {
		h.t.Errorf("nEntries = %d, want %d", got, entries)
	}
	if got := len(h.s.entries); got != entries {
		h.t.Errorf("len(entries) = %d, want %d", got, entries)
	}
	if got := h.s.nWaiters.Load(); got != int64(waiters) {
		h.t.Errorf("nWaiters = %d, want %d", got, waiters)
	}
	n := 0
	for _, e := range h.s.entries {
		n += len(e.waiters)
	}
	if n != waiters {
		h.t.Errorf("callers parked in entries = %d, want %d", n, waiters)
	}
}

// idle checks that the shard holds nothing: no entry, no caller, no timer,
// no store operation.
func (h *harness) idle() {
	h.t.Helper()
	h.wantCounts(0, 0)
	if n := len(h.s.timers); n != 0 {
		h.t.Errorf("timers = %d, want 0 (first kind %d)", n, h.s.timers[0].kind)
	}
	if h.batch != nil || h.queued() != 0 {
		h.t.Errorf("store operations out: %d, queued: %d", len(h.batch), h.queued())
	}
}

// queued returns how many store operations wait for the next batch: those
// submitted and not yet flushed. (An inline store runs them as they are
// submitted.)
func (h *harness) queued() int {
	if h.s.inline {
		return 0
	}
	return int(h.s.nOps.Load() - h.flushed)
}

// reply returns r's one pending reply.
func (h *harness) reply(r *Request) Reply {
	h.t.Helper()
	select {
	case rep := <-r.Reply:
		return rep
	default:
		h.t.Fatalf("no reply for the caller of %q (where=%d)", r.Key, r.where)
		return Reply{}
	}
}

func (h *harness) noReply(rs ...*Request) {
	h.t.Helper()
	for _, r := range rs {
		select {
		case rep := <-r.Reply:
			h.t.Fatalf("unexpected reply for the caller of %q: %s", r.Key, fmtReply(rep))
		default:
		}
	}
}

// want checks r's one pending reply against want: Kind, Token,
// Joined, Waited, Op and LeaseLeft exactly; Err with errors.Is (nil: none).
// It returns the reply for further checks.
func (h *harness) want(r *Request, want Reply) Reply {
	h.t.Helper()
	got := h.reply(r)
	ok := got.Kind == want.Kind && got.Token == want.Token &&
		got.Joined == want.Joined && got.Waited == want.Waited && got.Op == want.Op &&
		got.LeaseLeft == want.LeaseLeft
	if want.Err == nil {
		ok = ok && got.Err == nil
	} else {
		ok = ok && errors.Is(got.Err, want.Err)
	}
	if !ok {
		h.t.Fatalf("reply to the caller of %q:\n got %s\nwant %s", r.Key, fmtReply(got), fmtReply(want))
	}
	return got
}

// grant runs the claim out for r and checks that r is granted the key.
func (h *harness) grant(r *Request) store.Token {
	h.t.Helper()
	h.op(store.OpClaim)
	h.run()
	rep := h.reply(r)
	if rep.Kind != Grant || rep.Token.IsZero() {
		h.t.Fatalf("reply to the candidate = %s, want a Grant with a token", fmtReply(rep))
	}
	return rep.Token
}

func fmtReply(r Reply) string {
	s := fmt.Sprintf("{Kind:%d Token:%+v Joined:%v Waited:%v Op:%v LeaseLeft:%v Err:%v",
		r.Kind, r.Token, r.Joined, r.Waited, r.Op, r.LeaseLeft, r.Err)
	if r.Result != nil {
		s += fmt.Sprintf(" Result:{Value:%v Record.Value:%q}", r.Result.Value, r.Result.Record.Value)
	}
	return s + "}"
}

func phaseName(p phase) string {
	switch p {
	case phClaiming:
		return "claiming"
	case phRunning:
		return "running"
	case phLost:
		return "lost"
	case phFinishing:
		return "finishing"
	case phReleasing:
		return "releasing"
	case phRemote:
		return "remote"
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}
