package idem

import (
	"cmp"
	"fmt"
	"github.com/idemrt/idem/internal/ownerhook"
	"log/slog"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
)

// Options configures a [Runtime]. The zero value is valid: every field has a
// documented default, used when the field is left zero. Negative values are
// errors, never "no limit".
type Options struct {
	// Policy is the runtime's policy: every call's settle time (or fail
	// fast), lease and its renewal, result TTL and classifier, unless the
	// call or its front end sets its own. Its fields left zero take the
	// built-in defaults (see [Policy]): Settle 30s, Lease 60s (renewed),
	// TTL 24h, no classifier.
	Policy

	// Store persists keys and results.
	// Default: a new in-memory store (store/memstore) owned by the runtime.
	Store store.Store

	// Shards is the number of shard actors keys are spread over. Keep it a
	// small multiple of GOMAXPROCS: more shards means smaller store batches.
	// Default: 2 × GOMAXPROCS. At most 4096.
	Shards int

	// CacheEntries is how many completed results the hot cache (an LRU per
	// shard, in front of the store) holds in all.
	// Default: 65536.
	CacheEntries int

	// CacheBytes bounds the hot cache in bytes as well: each result is
	// weighed by its encoded size (value, error text, fingerprint, owner),
	// and the least recently used go first. A result heavier than a
	// shard's share (CacheBytes / Shards) is not cached: the store serves
	// its replays. Stats reports what the cache holds.
	// Default: 64 MiB.
	CacheBytes int64

	// EvictWhenFull lets the runtime's own in-memory store (when Store is
	// nil) evict stored results before their TTL when it holds
	// memstore.DefaultMaxRecords records. By default it refuses new keys
	// with ErrOverloaded instead, so that a flood of new keys cannot push
	// out a real key's result, whose retry would run its effect again. A
	// store you pass has its own setting (memstore.Options.WhenFull).
	EvictWhenFull bool

	// DisableCache turns the hot cache off: every replay reads the store.
	// Default: false.
	DisableCache bool

	// PollInterval is the longest wait between two checks of a key that
	// another instance holds, when the store cannot wake waiters (it does
	// not implement store.Waker: a store of your own, say). The first check
	// comes sooner (after 10ms, or PollInterval if that is shorter), and
	// the waits double up to PollInterval; none goes past the end of the
	// holder's lease. A waiter thus learns that the key settled at most
	// about PollInterval after it did. Lower it for quicker answers, raise
	// it for fewer store reads. Stores that wake waiters (memstore,
	// redisstore) do not poll: they keep only a slower safety-net timer in
	// case a wake-up is lost.
	// Default: 100ms. At least 1ms: shorter, a waiter would read the store
	// back to back.
	PollInterval time.Duration

	// Liveness configures early takeover (see docs/semantics.md, "Early
	// takeover"), with a store that keeps liveness records
	// (store.Liveness: memstore, redisstore, pgstore). The zero value is
	// the defaults: beats every 1s, a record lives 3s, grace 5s.
	Liveness Liveness

	// MaxPending bounds the calls pending in one shard (waiting or running);
	// past it, calls fail at once with ErrOverloaded.
	// Default: 10000.
	MaxPending int

	// MaxWaitersPerKey bounds the callers waiting on one key in a shard;
	// past it, a duplicate fails at once with ErrOverloaded, so that one
	// hot key cannot take its whole shard's MaxPending from the others.
	// Default: three quarters of MaxPending (a quarter stays for other
	// keys).
	MaxWaitersPerKey int

	// MaxResultBytes bounds a function's encoded result. A larger one is
	// not sent to the store (where it could break a connection shared by
	// other keys): the owner and every waiter get a permanent
	// *CodecError wrapping ErrResultTooLarge, which is stored in its place,
	// since the function ran and its effect must not run again.
	// With a store that states its size limit (store.SizeLimited: the
	// Redis store reads its server's proto-max-bulk-len), the runtime
	// lowers it to that limit less store.RecordOverhead. A result the
	// store refuses for its size anyway (store.ErrTooLarge) gets the same
	// stored error: it is never retried, and its key is never released.
	// Default: 64 MiB (a default Redis takes up to 512 MB).
	MaxResultBytes int

	// MaxBatch bounds the store operations sent in one batch.
	// Default: 256.
	MaxBatch int

	// StoreTimeout bounds each store operation (each batch).
	// Default: 5s.
	StoreTimeout time.Duration

	// Logger receives the runtime's warnings (lease lost, store errors). The
	// runtime logs nothing per call at info level.
	// Default: nil, which discards everything.
	Logger *slog.Logger

	// Clock is the source of time for leases, TTLs and settle timeouts.
	// Tests pass a *clock.Fake.
	// Default: the real clock.
	Clock clock.Clock

	// Observer receives an event per call and per store batch (see
	// [Observer]; package idemprom exports them to Prometheus).
	// Default: nil, which measures nothing.
	Observer Observer

	// ObserveKeys puts each call's key in its CallEvent. Keys can hold
	// personal data; by default events carry only the key's namespace.
	// Default: false.
	ObserveKeys bool

	// TracerProvider, when set, wraps every call of Do in an OpenTelemetry
	// span "idem.Do" (attributes idem.namespace, idem.outcome, idem.result,
	// idem.waited, idem.wait_us, idem.token); the function runs under it.
	// Default: nil, no tracing.
	TracerProvider trace.TracerProvider
}

// Liveness configures early takeover: the runtime beats (refreshes its
// instance's liveness record in the store) every Every, and a caller that
// waits for a key another instance holds takes the key over as soon as
// that instance's record has ended, rather than at the end of the
// holder's lease. A SIGKILLed instance's keys are thus free about TTL +
// Every after its last beat (4s by default), while leases stay long
// enough to ride out a store outage. Each instance sends one beat per
// Every, and one liveness read per Every for each other instance it waits
// on.
type Liveness struct {
	// Every is how often the runtime beats.
	// Default: 1s.
	Every time.Duration
	// TTL is how long a beat keeps the instance live. An instance whose
	// beats stop (a crash, or a network partition from the store) is
	// taken for dead TTL after its last beat. It must be more than Every.
	// Default: 3s.
	TTL time.Duration
	// Grace is how long the runtime's own beats must have succeeded,
	// without a gap longer than TTL, before it takes another instance for
	// dead: after a store outage every record has ended, and the others
	// need the time to beat again. Keep it above Every + the time a beat
	// takes after an outage (a reconnect).
	// Default: 5s.
	Grace time.Duration
	// Disable turns early takeover off: a key is taken over only when its
	// holder's lease ends, and the runtime does not beat.
	// Default: false.
	Disable bool
}

const maxShards = 4096

// minPollInterval is the shortest Options.PollInterval accepted.
const minPollInterval = time.Millisecond

// resolve fills in defaults and rejects invalid values.
func (o Options) resolve() (Options, error) {
	if err := o.validate(); err != nil {
		return o, err
	}
	o.fillDefaults()
	return o, nil
}

// validate rejects negative and out-of-range values.
func (o *Options) validate() error {
	if err := o.Policy.Validate("Options"); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Options.%s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"StoreTimeout", o.StoreTimeout}, {"PollInterval", o.PollInterval},
		{"Liveness.Every", o.Liveness.Every}, {"Liveness.TTL", o.Liveness.TTL}, {"Liveness.Grace", o.Liveness.Grace}} {
		if d.v < 0 {
			return bad("%s is %v; it must not be negative (zero means the default)", d.name, d.v)
		}
		if d.v > store.MaxDuration {
			return bad("%s is %v; it must be at most %v", d.name, d.v, store.MaxDuration)
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"Shards", o.Shards}, {"CacheEntries", o.CacheEntries}, {"MaxPending", o.MaxPending}, {"MaxBatch", o.MaxBatch}} {
		if n.v < 0 {
			return bad("%s is %d; it must not be negative (zero means the default)", n.name, n.v)
		}
	}
	if o.MaxResultBytes < 0 {
		return bad("MaxResultBytes is %d; it must not be negative (zero means the default)", o.MaxResultBytes)
	}
	if o.MaxWaitersPerKey < 0 {
		return bad("MaxWaitersPerKey is %d; it must not be negative (zero means the default)", o.MaxWaitersPerKey)
	}
	if o.CacheBytes < 0 {
		return bad("CacheBytes is %d; it must not be negative (zero means the default)", o.CacheBytes)
	}
	if o.PollInterval != 0 && o.PollInterval < minPollInterval {
		return bad("PollInterval is %v; it must be at least %v (zero means the default)", o.PollInterval, minPollInterval)
	}
	if every, ttl := cmp.Or(o.Liveness.Every, actors.DefaultLiveEvery), cmp.Or(o.Liveness.TTL, actors.DefaultLiveTTL); ttl <= every {
		return bad("Liveness.TTL is %v; it must be more than Liveness.Every (%v)", ttl, every)
	}
	if o.Shards > maxShards {
		return bad("Shards is %d; at most %d", o.Shards, maxShards)
	}
	return nil
}

// fillDefaults sets every field left zero to its documented default.
func (o *Options) fillDefaults() {
	o.Policy = o.Policy.Inherit(builtin)
	if o.Shards == 0 {
		o.Shards = 2 * runtime.GOMAXPROCS(0)
	}
	if o.CacheEntries == 0 {
		o.CacheEntries = 65536
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 64 << 20
	}
	if o.PollInterval == 0 {
		o.PollInterval = actors.DefaultPollInterval
	}
	if o.MaxPending == 0 {
		o.MaxPending = 10000
	}
	if o.MaxResultBytes == 0 {
		o.MaxResultBytes = 64 << 20
	}
	if o.MaxWaitersPerKey == 0 {
		o.MaxWaitersPerKey = max(1, o.MaxPending-o.MaxPending/4)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 256
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// CallOption adjusts one call of [Do] (or [Get]). Options that set a
// field of the call's [Policy] override the field where the call's front
// end and runtime set it; a later option overrides an earlier one.
type CallOption func(*callOptions)

// callOptions are a call's options: the runtime's policy with the call's
// own fields set over it, and the rest.
type callOptions struct {
	ttl, lease, settle time.Duration
	failFast           bool // a duplicate does not wait: settle is not used
	fp                 []byte
	codec              Codec
	outcome            *Outcome
	classifier         func(error) bool
	ownerWaits         bool
	noRenew            bool
	completer          ownerhook.Completer // the owner stores its result with it (package pgtx)
	err                error
}

// CheckCallOptions returns the error Do fails with when one of opts is
// invalid (a duration out of range, FailFast with a settle time), nil
// otherwise, without running anything: a front end that takes call
// options for later calls refuses them when it is made.
func CheckCallOptions(opts ...CallOption) error {
	var c callOptions
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c.err
}

func (c *callOptions) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *callOptions) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
}

// setPolicy sets the call's policy from p (the runtime's, resolved) or
// over it (a call's: only p's fields that are set).
func (c *callOptions) setPolicy(p Policy) {
	switch {
	case p.FailFast:
		c.failFast = true
	case p.Settle > 0:
		c.settle, c.failFast = p.Settle, false
	}
	if p.Lease > 0 {
		c.lease = p.Lease
	}
	if p.TTL > 0 {
		c.ttl = p.TTL
	}
	if p.NoRenewal {
		c.noRenew = true
	}
	if p.Classifier != nil {
		c.classifier = p.Classifier
	}
}

// WithPolicy sets, for this call, every field of p that is set (non-zero);
// the fields p leaves zero keep what the front end or the runtime says
// (see [Policy]). A field out of range fails the call with
// ErrInvalidArgument, as does FailFast with Settle. Set p's Settle or
// FailFast to decide both: a settle time waits even where the runtime
// fails fast.
func WithPolicy(p Policy) CallOption {
	if err := p.Validate("WithPolicy: Policy"); err != nil {
		return func(c *callOptions) { c.setErr(err) }
	}
	return func(c *callOptions) { c.setPolicy(p) }
}

// WithTTL sets how long this call's result is kept (default: the
// runtime's Policy.TTL, 24h). It must be positive and at most 100 years
// (store.MaxDuration).
func WithTTL(d time.Duration) CallOption {
	return func(c *callOptions) {
		if err := store.CheckDuration("WithTTL", d); err != nil {
			c.setErr(err)
			return
		}
		c.ttl = d
	}
}

// WithLease sets this call's lease (default: the runtime's Policy.Lease,
// 60s). It must be positive and at most 100 years: a lease never lasts
// forever.
func WithLease(d time.Duration) CallOption {
	return func(c *callOptions) {
		if err := store.CheckDuration("WithLease", d); err != nil {
			c.setErr(err)
			return
		}
		c.lease = d
	}
}

// WithSettle sets how long this call waits for a run of its key in flight
// (default: the runtime's Policy.Settle, 30s), also when the runtime or
// the front end fails fast. It must be positive and at most 100 years
// (store.MaxDuration): WithSettle(0) is an error, never "do not wait";
// use [WithFailFast] for that.
func WithSettle(d time.Duration) CallOption {
	return func(c *callOptions) {
		switch {
		case d == 0:
			c.fail("WithSettle(0): a settle time must be positive; to fail at once instead of waiting, use WithFailFast()")
		case d < 0:
			c.fail("WithSettle(%v): a settle time must be positive", d)
		case d > store.MaxDuration:
			c.fail("WithSettle(%v): a settle time must be at most %v", d, store.MaxDuration)
		default:
			c.settle, c.failFast = d, false
		}
	}
}

// WithFailFast makes this call fail at once with a [*ConflictError] while
// another run holds its key, instead of waiting for it (Policy.FailFast).
// A later WithSettle makes it wait again.
func WithFailFast() CallOption {
	return func(c *callOptions) { c.failFast = true }
}

// WithFingerprint ties the key to a request: a digest of what the call does
// (method, path, body). A call whose fingerprint differs from the one the key
// was used with gets ErrFingerprintMismatch instead of another request's
// result. Calls without a fingerprint match any.
func WithFingerprint(fp []byte) CallOption {
	fp = append([]byte(nil), fp...)
	return func(c *callOptions) { c.fp = fp }
}

// WithCodec sets how this call's result is encoded for the store (default:
// JSON).
func WithCodec(codec Codec) CallOption {
	return func(c *callOptions) {
		if codec == nil {
			c.fail("WithCodec(nil)")
			return
		}
		c.codec = codec
	}
}

// WithOutcome makes Do store how it got its answer in *o.
func WithOutcome(o *Outcome) CallOption {
	return func(c *callOptions) { c.outcome = o }
}

// WithOwnerWaits makes the owner's call return only once its function has
// returned and its result is handled, even if the caller's context ends
// first (the function still runs detached from that cancellation). Use it
// when the context carries state that must stay valid while the function
// runs, as an HTTP request's router state does until its handler returns.
// Callers that wait for another caller's run still leave when their context
// ends.
func WithOwnerWaits() CallOption {
	return func(c *callOptions) { c.ownerWaits = true }
}

// WithoutRenewal makes the lease a hard limit (Policy.NoRenewal): it is
// not renewed while the function runs, so a run that outlasts it (a hung
// function in a live process, too) can be taken over by another caller,
// and its own result is then refused with ErrLeaseLost. That is the
// semantics of a lock with a TTL; by default the lease is renewed every
// third of it and only a process that stopped renewing loses its keys.
func WithoutRenewal() CallOption {
	return func(c *callOptions) { c.noRenew = true }
}

// WithClassifier sets which errors of this call's function are permanent
// (Policy.Classifier), replacing the front end's and the runtime's. Errors
// marked with [Permanent] always are; with a nil isPermanent, only they
// are.
func WithClassifier(isPermanent func(error) bool) CallOption {
	return func(c *callOptions) { c.classifier = isPermanent }
}
