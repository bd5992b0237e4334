// Package redisstore is a [store.Store] on Redis, single node or Cluster,
// through go-redis v9's redis.UniversalClient.
//
// Each transition is one Lua script (claim; finish = complete, permanent
// failure or release; renew), atomic on the server, with the lease clock
// taken from the Redis server (TIME) and every write fenced by owner and
// fence. A record is one hash per key whose name carries a hash tag, so
// every script touches one slot of a cluster. Batches of operations go out as
// one pipeline (split per node by go-redis on a cluster). Scripts are loaded
// at start on every master, and reloaded when a pipeline meets NOSCRIPT (a
// restarted or failed-over node).
//
// go-redis never re-sends a script call whose reply was lost (a read
// timeout, a dropped connection), whatever the client's MaxRetries: another
// client's call may run between the two copies, and the second copy would
// answer for the state it finds, not for what the first did (a Release that
// released the key would answer ErrLeaseLost after someone claimed it). A
// lost reply is the caller's error, except for a Claim, a Renew or a Get:
// the store sends those again itself, a few times, because their repeat
// answers truly (but for a claim's Takeover flag, see store.ClaimResult).
// The runtime repeats a Complete and a Release. MOVED and ASK redirects are
// still followed, and calls that Redis refused before running them
// (TRYAGAIN, LOADING, ...) are sent again.
//
// Waiters on other instances are woken by pub/sub: a claim that finds the key
// in progress registers its instance in the record's waiter set, in the same
// script; the finish script PUBLISHes to the inbox channel of each registered
// instance only. Pub/sub drops messages while a subscription reconnects, so
// the runtime also re-claims on a timer, and at once when this store reports
// a resubscribe (wake-up "").
//
// See docs/redis.md for the data model, lost replies, what survives which
// failure, and sizing.
package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// KeyPrefix starts every Redis key and channel of the store.
	// Default: "idem:".
	KeyPrefix string
	// Scope, when set, is applied to every key with store.BuildKey before it
	// is stored, so that several services can share one Redis.
	// Default: none.
	Scope store.Scope
	// Timeout bounds each batch (one pipeline) when the caller's context
	// has no earlier deadline.
	// Default: 0, the caller's context alone.
	Timeout time.Duration
}

// Store is the Redis store. Create it with [New].
type Store struct {
	c       redis.UniversalClient
	prefix  string
	scope   store.Scope
	scoped  bool
	timeout time.Duration
	inbox   string

	mu   sync.Mutex
	subs []*subscription
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Batcher = (*Store)(nil)
	_ store.Waker   = (*Store)(nil)
)

// New returns a Store on c (a *redis.Client or a *redis.ClusterClient) and
// loads its scripts on every master. It fails if Redis cannot be reached.
func New(ctx context.Context, c redis.UniversalClient, opts Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redisstore.New with a nil client", store.ErrInvalidArgument)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: redisstore: Timeout %v must not be negative", store.ErrInvalidArgument, opts.Timeout)
	}
	prefix := opts.KeyPrefix
	if prefix == "" {
		prefix = "idem:"
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("%w: redisstore: KeyPrefix %q must not contain { or }", store.ErrInvalidArgument, prefix)
	}
	s := &Store{c: c, prefix: prefix, scope: opts.Scope, scoped: opts.Scope != (store.Scope{}),
		timeout: opts.Timeout, inbox: prefix + "inbox:"}
	if err := s.loadScripts(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// loadScripts loads every script; on a cluster client, on every master.
func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}

// RecordKey returns the Redis key of key's record hash: the prefix, then the
// SHA-256 of the (scoped) key as a hash tag. Hashing keeps the tag short and
// free of braces whatever the key holds.
func (s *Store) RecordKey(key string) string {
	if s.scoped {
		key = store.BuildKey(key, s.scope)
	}
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.Grow(len(s.prefix) + 45)
	b.WriteString(s.prefix)
	b.WriteByte('{')
	b.WriteString(base64.RawURLEncoding.EncodeToString(sum[:]))
	b.WriteByte('}')
	return b.String()
}

func (s *Store) keys(key string) []string {
	rk := s.RecordKey(key)
	return []string{rk, rk + ":w"}
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	op := &store.Op{Kind: store.OpClaim, Key: key, Claim: req}
	s.Batch(ctx, []*store.Op{op})
	return op.Result, op.Err
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	op := &store.Op{Kind: store.OpComplete, Key: key, Token: tok, Record: rec, TTL: ttl}
	s.Batch(ctx, []*store.Op{op})
	return op.Result.Record, op.Err
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, key string, tok store.Token) error {
	op := &store.Op{Kind: store.OpRelease, Key: key, Token: tok}
	s.Batch(ctx, []*store.Op{op})
	return op.Err
}

// Renew implements [store.Store].
func (s *Store) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	op := &store.Op{Kind: store.OpRenew, Key: key, Token: tok, Lease: lease}
	s.Batch(ctx, []*store.Op{op})
	return op.Err
}

// Get implements [store.Store].
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	op := &store.Op{Kind: store.OpGet, Key: key}
	s.Batch(ctx, []*store.Op{op})
	return op.Result.Record, op.Err
}

// Forget implements [store.Store].
func (s *Store) Forget(ctx context.Context, key string) error {
	op := &store.Op{Kind: store.OpForget, Key: key}
	s.Batch(ctx, []*store.Op{op})
	return op.Err
}

// ms turns a duration into whole milliseconds, rounding up so that no
// positive duration becomes zero.
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// call is one op turned into a script call.
type call struct {
	op   *store.Op
	sc   *redis.Script
	keys []string
	args []any
	cmd  *redis.Cmd
	// unsure is set once a reply of the call was lost: a copy of it may
	// have run (see Store.repeat).
	unsure bool
}

// prepare validates op and builds its script call; it sets op.Err and
// returns false for an op that must not reach Redis.
func (s *Store) prepare(op *store.Op) (call, bool) {
	op.Err = nil
	if err := store.ValidateKey(op.Key); err != nil {
		op.Err = err
		return call{}, false
	}
	c := call{op: op, keys: s.keys(op.Key)}
	switch op.Kind {
	case store.OpClaim:
		r := op.Claim
		if r.Owner == "" {
			op.Err = fmt.Errorf("%w: empty owner", store.ErrInvalidArgument)
		} else if op.Err = store.CheckDuration("lease", r.Lease); op.Err == nil {
			op.Err = store.CheckDuration("ttl", r.TTL)
		}
		waiter := ""
		if r.Waiter != "" {
			waiter = r.Waiter + ":" + op.Key
		}
		c.sc, c.args = claimScript, []any{r.Owner, ms(r.Lease), ms(r.TTL), r.Fingerprint, waiter}
	case store.OpComplete:
		op.Err = store.CheckDuration("ttl", op.TTL)
		st, res := "c", op.Record.Value
		if op.Record.Failed {
			st, res = "f", []byte(op.Record.Error)
		}
		c.sc, c.args = finishScript, []any{op.Token.Owner, op.Token.Fence, st, res, op.Record.Fingerprint, ms(op.TTL), s.inbox}
	case store.OpRelease:
		c.sc, c.args = finishScript, []any{op.Token.Owner, op.Token.Fence, "r", "", "", 0, s.inbox}
	case store.OpRenew:
		op.Err = store.CheckDuration("lease", op.Lease)
		c.sc, c.args = renewScript, []any{op.Token.Owner, op.Token.Fence, ms(op.Lease)}
	case store.OpGet:
		c.sc = getScript
	case store.OpForget:
		c.sc = forgetScript
	default:
		op.Err = fmt.Errorf("%w: unknown op %v", store.ErrInvalidArgument, op.Kind)
	}
	return c, op.Err == nil
}

// Batch implements [store.Batcher]: all ops go out in one pipeline. Ops
// that meet NOSCRIPT (a node restarted or failed over and lost its script
// cache) are sent again once the scripts are loaded again. go-redis never
// re-sends an op whose reply was lost (a read timeout, a dropped
// connection), whatever the client's MaxRetries. The store itself sends
// again, a few times while ctx lasts, a Claim, a Renew or a Get whose
// reply was lost, and any op that Redis refused before running it
// (TRYAGAIN, LOADING, CLUSTERDOWN and the like); for a Complete, a Release or
// a Forget whose reply was lost, the lost reply's error is the op's error.
func (s *Store) Batch(ctx context.Context, ops []*store.Op) {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	calls := make([]call, 0, len(ops))
	for _, op := range ops {
		if c, ok := s.prepare(op); ok {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return
	}
	sent := time.Now()
	s.run(ctx, calls)
	s.repeat(ctx, calls, sent)
	now := time.Now()
	for _, c := range calls {
		s.decode(c, now)
	}
}

// run sends calls in one pipeline, then sends those that met NOSCRIPT once
// more after loading the scripts. A NOSCRIPT reply means that the script
// did not run, so sending it again runs it once.
func (s *Store) run(ctx context.Context, calls []call) {
	s.exec(ctx, calls)
	var at []int
	for i, c := range calls {
		if err := c.cmd.Err(); err != nil && isNoScript(err) {
			at = append(at, i)
		}
	}
	if len(at) > 0 && s.loadScripts(ctx) == nil {
		sub := pick(calls, at)
		s.exec(ctx, sub)
		keep(calls, at, sub)
	}
}

// The store sends a call again at most maxRepeats times, after firstRepeat,
// then twice as long before each next time.
const (
	maxRepeats  = 3
	firstRepeat = 10 * time.Millisecond
)

// repeat sends again, up to maxRepeats times and while ctx lasts, the calls
// that Redis refused before running them (see notRun), and the claims,
// renewals and gets whose reply was lost (see replyLost). calls were first
// sent at sent.
//
// A refused call did not run: sending it again runs it once, whatever its
// op, unless an earlier copy's reply was lost. A call whose reply was lost
// may have run, and a repeat answers for the state it finds; the question
// is whether a call of another client, run between the first copy and the
// repeat, can make that answer wrong:
//
//   - Claim. A claim whose reply is lost may hold the key for a whole lease
//     with no one to run it (a ghost claim), so it is worth repeating. The
//     repeat has the same owner, and the claim script answers the owner
//     that holds the key with Claimed and the same token. Nothing else can
//     end a claim the first copy made: another owner's claim finds its
//     lease live (in progress), Forget refuses a key in progress, the record
//     lives at least the lease, and the holder's own Complete, Release and
//     Renew need the token this Claim has not returned yet. Only the end of
//     the lease lets another owner take the key over, so a claim is
//     repeated only within half a lease of its first send: the repeat then
//     runs while the first copy's lease holds, unless it spends more than
//     half a lease on its way to Redis. A first copy that found the key in
//     progress or completed wrote nothing but the waiter set, and the
//     repeat's answer is a state the key had during the call. One thing is
//     lost: a first copy that took the key over is answered by the repeat
//     as the holder's replay, with Takeover false (see [store.ClaimResult]).
//   - Renew. Its one write renews the lease of the holder's own token
//     (fenced by owner and fence); a repeat renews it again from a later
//     moment, as the holder's next renewal would. A repeat that finds the
//     key completed or taken over answers ErrLeaseLost, which is true when
//     it runs. It is repeated within half a lease too, so that a renewal
//     the first copy made still holds.
//   - Get writes nothing: a repeat reads the key at a later moment of the
//     same call.
//
// Complete, Release and Forget whose reply was lost are not repeated: when a
// call of another client runs between two copies, the repeat reports on
// what that call left, not on what the first copy did (a Release that
// released the key, after someone claimed it, would answer ErrLeaseLost).
// Their lost replies reach the caller as errors; the runtime repeats a
// Complete (the finish script recognises its own completion) and a Release
// while the lease lasts.
func (s *Store) repeat(ctx context.Context, calls []call, sent time.Time) {
	wait := firstRepeat
	for range maxRepeats {
		if ctx.Err() != nil {
			return
		}
		var at []int
		for i := range calls {
			c := &calls[i]
			err := c.cmd.Err()
			lost := replyLost(err)
			c.unsure = c.unsure || lost
			if (lost || notRun(err)) && (!c.unsure || repeatable(c.op, time.Since(sent))) {
				at = append(at, i)
			}
		}
		if len(at) == 0 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait *= 2
		sub := pick(calls, at)
		s.run(ctx, sub)
		keep(calls, at, sub)
	}
}

// repeatable reports whether op, first sent age ago, may be sent again
// after a reply of it was lost: see [Store.repeat].
func repeatable(op *store.Op, age time.Duration) bool {
	switch op.Kind {
	case store.OpClaim:
		return age < op.Claim.Lease/2
	case store.OpRenew:
		return age < op.Lease/2
	case store.OpGet:
		return true
	}
	return false
}

// replyLost reports whether err says that no reply came (a read timeout, a
// dropped or refused connection), so that the call may or may not have
// run. A reply from Redis, even an error, is not lost; a call cut short by
// a closed client is not repeated.
func replyLost(err error) bool {
	var reply redis.Error
	return err != nil && !errors.As(err, &reply) && !errors.Is(err, redis.ErrClosed)
}

// notRun reports whether err is a reply by which Redis refuses a call
// before running it, one that may succeed later: a dataset still loading,
// a slot being migrated (TRYAGAIN), a cluster or master down, a write sent
// to a replica, too few replicas, too many clients. (go-redis re-sends
// such calls, but not the store's: see [noRetry].)
func notRun(err error) bool {
	return err != nil && (redis.IsTryAgainError(err) || redis.IsLoadingError(err) ||
		redis.IsClusterDownError(err) || redis.IsMasterDownError(err) || redis.IsReadOnlyError(err) ||
		redis.IsNoReplicasError(err) || redis.IsMaxClientsError(err))
}

// pick returns the calls at the indexes at.
func pick(calls []call, at []int) []call {
	sub := make([]call, len(at))
	for j, i := range at {
		sub[j] = calls[i]
	}
	return sub
}

// keep stores the replies of sub, picked from calls at at, in calls.
func keep(calls []call, at []int, sub []call) {
	for j, i := range at {
		calls[i].cmd = sub[j].cmd
	}
}

// exec sends calls in one pipeline.
func (s *Store) exec(ctx context.Context, calls []call) {
	pipe := s.c.Pipeline()
	for i := range calls {
		c := &calls[i]
		c.cmd = evalSha(ctx, c.sc, c.keys, c.args)
		_ = pipe.Process(ctx, noRetry{c.cmd})
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
}

// evalSha builds the EVALSHA call of sc, as sc.EvalSha does.
func evalSha(ctx context.Context, sc *redis.Script, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	cmd.SetFirstKeyPos(3)
	return cmd
}

// noRetry is a script call that go-redis must not send again once it may
// have reached Redis. A pipeline (of a Client or a ClusterClient) that
// holds a command whose NoRetry is true is not re-sent after a read
// timeout or a dropped connection, whatever the client's MaxRetries: the
// call may have run, and when another client's call runs between the two
// copies, the second copy answers for the state it finds, not for what the
// first one did. A MOVED or ASK reply still sends the call on to the node
// that holds the key (it did not run), and NOSCRIPT is handled by
// [Store.run].
type noRetry struct{ *redis.Cmd }

// NoRetry implements redis.Cmder: the call is never re-sent by go-redis.
func (noRetry) NoRetry() bool { return true }

func isNoScript(err error) bool { return strings.HasPrefix(err.Error(), "NOSCRIPT") }

// decode turns a script's reply into op's result.
func (s *Store) decode(c call, now time.Time) {
	op := c.op
	vals, err := c.cmd.Slice()
	if err != nil {
		op.Err = err
		return
	}
	r := reply{vals: vals}
	code := r.int(0)
	if code == -1 {
		op.Err = &CorruptError{Key: op.Key, RedisKey: c.keys[0], Reason: r.str(1)}
		return
	}
	if r.err != nil { // no code: never read it as 0 (lease lost, not found)
		op.Err = &CorruptError{Key: op.Key, RedisKey: c.keys[0], Reason: r.err.Error()}
		return
	}
	switch op.Kind {
	case store.OpClaim:
		switch code {
		case 1:
			op.Result = store.ClaimResult{Status: store.Claimed,
				Token:     store.Token{Fence: r.uint(1), Owner: op.Claim.Owner},
				LeaseLeft: r.millis(2), Takeover: r.int(3) == 1}
		case 2:
			op.Result = store.ClaimResult{Status: store.Completed, Record: r.record(1, now)}
		case 3:
			op.Result = store.ClaimResult{Status: store.InProgress,
				LeaseLeft: r.millis(1),
				Token:     store.Token{Fence: r.uint(2)}, Fingerprint: r.bytes(3)}
		default:
			r.err = fmt.Errorf("unexpected %v reply %v", op.Kind, vals)
		}
	case store.OpComplete:
		switch code {
		case 1:
			op.Result.Record = store.Record{Value: op.Record.Value, Failed: op.Record.Failed, Error: op.Record.Error,
				Fingerprint: op.Record.Fingerprint, Token: op.Token, CreatedAt: now, ExpiresAt: now.Add(op.TTL)}
			if op.Record.Failed {
				op.Result.Record.Value = nil
			} else {
				op.Result.Record.Error = ""
			}
		case 2:
			// A replay: what is stored, with this token.
			rec := store.Record{Failed: r.failed(1), Fingerprint: r.bytes(3), Token: op.Token}
			if rec.Failed {
				rec.Error = r.str(2)
			} else {
				rec.Value = r.bytes(2)
			}
			rec.CreatedAt, rec.ExpiresAt = r.times(4, 5, 6, now)
			op.Result.Record = rec
		case 0:
			op.Err = store.ErrLeaseLost
		default:
			r.err = fmt.Errorf("unexpected %v reply %v", op.Kind, vals)
		}
	case store.OpRelease, store.OpRenew:
		switch code {
		case 1:
		case 0:
			op.Err = store.ErrLeaseLost
		default:
			r.err = fmt.Errorf("unexpected %v reply %v", op.Kind, vals)
		}
	case store.OpGet:
		switch code {
		case 2:
			op.Result.Record = r.record(1, now)
		case 0:
			op.Err = store.ErrNotFound
		default:
			r.err = fmt.Errorf("unexpected %v reply %v", op.Kind, vals)
		}
	case store.OpForget:
		switch code {
		case 1:
		case 3:
			op.Err = store.ErrInProgress
		default:
			r.err = fmt.Errorf("unexpected %v reply %v", op.Kind, vals)
		}
	}
	if r.err != nil && op.Err == nil {
		op.Err = &CorruptError{Key: op.Key, RedisKey: c.keys[0], Reason: r.err.Error()}
	}
}

// CorruptError reports a record in Redis that the store cannot read: a
// field missing or garbled (written by hand, or by something else).
type CorruptError struct {
	Key      string // the key as given to the store
	RedisKey string // the record's hash in Redis
	Reason   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("redisstore: record %s of key %q is corrupt: %s", e.RedisKey, e.Key, e.Reason)
}

// reply reads a script's array reply, remembering the first problem.
type reply struct {
	vals []any
	err  error
}

func (r *reply) at(i int) any {
	if i >= len(r.vals) {
		if r.err == nil {
			r.err = fmt.Errorf("reply has %d elements, wanted more than %d", len(r.vals), i)
		}
		return nil
	}
	return r.vals[i]
}

func (r *reply) int(i int) int64 {
	switch v := r.at(i).(type) {
	case int64:
		return v
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is not an integer", i)
	}
	return 0
}

func (r *reply) uint(i int) uint64 {
	n := r.int(i)
	if n < 0 && r.err == nil {
		r.err = fmt.Errorf("reply element %d is negative", i)
	}
	return uint64(n)
}

func (r *reply) str(i int) string {
	if v, ok := r.at(i).(string); ok {
		return v
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is not a string", i)
	}
	return ""
}

func (r *reply) bytes(i int) []byte {
	s := r.str(i)
	if s == "" {
		return nil
	}
	return []byte(s)
}

// maxMs is store.MaxDuration in milliseconds. No lease, TTL or record age
// the scripts produce is longer; a longer one was set by hand, and time
// arithmetic on it could overflow.
const maxMs = int64(store.MaxDuration / time.Millisecond)

// millis reads element i, a number of milliseconds within ±maxMs.
func (r *reply) millis(i int) time.Duration {
	n := r.int(i)
	if n > maxMs || n < -maxMs {
		if r.err == nil {
			r.err = fmt.Errorf("reply element %d: %d ms is beyond the %v limit", i, n, store.MaxDuration)
		}
		n = 0
	}
	return time.Duration(n) * time.Millisecond
}

// times turns the server's completion time, the record's PTTL and the
// server's now into local times: the store reports times by the local
// clock, so that callers can compare them with their own.
func (r *reply) times(ca, pttl, now int, local time.Time) (created, expires time.Time) {
	serverNow, done := r.int(now), r.int(ca)
	left := r.int(pttl)
	if left < 0 { // -1: no expiry (set by hand); -2: gone in the meantime
		if r.err == nil {
			r.err = fmt.Errorf("record has no TTL (PTTL %d)", left)
		}
		left = 0
	}
	// Both non-negative, so the age cannot overflow.
	if left > maxMs || done < 0 || serverNow < 0 || serverNow-done > maxMs || done-serverNow > maxMs {
		if r.err == nil {
			r.err = fmt.Errorf("record times beyond the %v limit (ca %d, PTTL %d, now %d ms)", store.MaxDuration, done, left, serverNow)
		}
		return local, local
	}
	created = local.Add(-time.Duration(serverNow-done) * time.Millisecond)
	expires = local.Add(time.Duration(left) * time.Millisecond)
	return created, expires
}

// failed reads a completed record's state at i: false for c, true for f.
func (r *reply) failed(i int) bool {
	st := r.str(i)
	if st != "c" && st != "f" && r.err == nil {
		r.err = fmt.Errorf("reply element %d: state %q is not c or f", i, st)
	}
	return st == "f"
}

// record reads {st, res, fp, fence, owner, ca, pttl, now} from i on.
func (r *reply) record(i int, now time.Time) store.Record {
	rec := store.Record{Failed: r.failed(i), Fingerprint: r.bytes(i + 2),
		Token: store.Token{Fence: r.uint(i + 3), Owner: r.str(i + 4)}}
	if rec.Failed {
		rec.Error = r.str(i + 1)
	} else {
		rec.Value = r.bytes(i + 1)
	}
	rec.CreatedAt, rec.ExpiresAt = r.times(i+5, i+6, i+7, now)
	return rec
}

// subscription is one inbox subscription.
type subscription struct {
	ps   *redis.PubSub
	done chan struct{}
	once sync.Once
}

// Subscribe implements [store.Waker]: it subscribes to a new inbox channel
// and calls fn with the key of each wake-up, and with "" after every
// resubscription (messages may have been lost during the reconnect).
func (s *Store) Subscribe(ctx context.Context, fn func(key string)) (string, func(), error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	id := hex.EncodeToString(b[:])
	ps := s.c.Subscribe(ctx, s.inbox+id)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return "", nil, fmt.Errorf("redisstore: subscribe: %w", err)
	}
	sub := &subscription{ps: ps, done: make(chan struct{})}
	ch := ps.ChannelWithSubscriptions()
	go func() {
		defer close(sub.done)
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				fn(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					fn("") // resubscribed after a reconnect: check every wait
				}
			}
		}
	}()
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	stop := func() {
		sub.once.Do(func() {
			_ = sub.ps.Close()
			<-sub.done
		})
	}
	return id, stop, nil
}

// Close ends every subscription the store made; it does not close the
// client, which belongs to the caller.
func (s *Store) Close() error {
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for _, sub := range subs {
		sub.once.Do(func() {
			_ = sub.ps.Close()
			<-sub.done
		})
	}
	return nil
}
