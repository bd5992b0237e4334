package redisstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

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
	// size is the bytes the call sends (keys and arguments; see sizeOf).
	size int
	// unconfirmed is set when the store waits for replicas
	// (Options.WaitReplicas) and fewer than asked confirmed the pipeline
	// that last carried this write (see wait.go).
	unconfirmed bool
}

// prepare validates op and builds its script call; it sets op.Err and
// returns false for an op that must not reach Redis.
func (s *Store) prepare(op *store.Op) (call, bool) {
	op.Err = nil
	if err := s.checkKey(op.Kind, op.Key); err != nil {
		op.Err = err
		return call{}, false
	}
	c := call{op: op, keys: s.keys(op.Key)}
	switch op.Kind {
	case store.OpClaim:
		r := op.Claim
		op.Err = store.CheckClaim(r)
		waiter := ""
		if r.Waiter != "" {
			waiter = r.Waiter + ":" + op.Key
		}
		// A record in progress outlives its lease by the TTL (see
		// packed.go), so a takeover always finds it, raises the fence and
		// counts one more attempt. The fence floor is read from the
		// server's clock by the script, when it runs: a floor read here
		// would be as old as the time the call spends on its way to Redis,
		// and a claim overtaken on the way by another client's claim,
		// completion and Forget of the key would create a record with a
		// fence below the forgotten one's. (So there is no SET NX claim of
		// a new key either: a value made here would carry such a floor.)
		c.sc, c.args = claimScript, []any{r.Owner, ms(r.Lease), ms(r.TTL), r.Fingerprint, waiter, r.Dead}
	case store.OpComplete:
		op.Err = store.CheckDuration("ttl", op.TTL)
		c.sc, c.args = finishScript, []any{heldPrefix(op.Token), completedValue(op.Token, op.Record, op.TTL), ms(op.TTL), s.inbox}
	case store.OpRelease:
		c.sc, c.args = finishScript, []any{heldPrefix(op.Token), "", 0, s.inbox}
	case store.OpRenew:
		op.Err = store.CheckDuration("lease", op.Lease)
		c.sc, c.args = renewScript, []any{op.Token.Owner, op.Token.Fence, ms(op.Lease)}
	case store.OpGet:
		c.sc = getScript
	case store.OpForget:
		c.sc, c.args = forgetScript, []any{s.invalChannel(), invalKey + s.scope + op.Key}
	default:
		op.Err = fmt.Errorf("%w: unknown op %v", store.ErrInvalidArgument, op.Kind)
	}
	if op.Err == nil {
		op.Err = s.checkSize(&c)
	}
	return c, op.Err == nil
}

// Batch implements [store.Batcher]: all ops go out in one pipeline (on a
// cluster client, one pipeline per master, see execCluster), or, when
// their bytes are over Options.MaxBatchBytes, in several pipelines one
// after the other, each under it (an op larger than it alone). An op
// with an argument over Options.MaxRecordBytes is not sent: its error is
// store.ErrTooLarge. Ops
// that meet NOSCRIPT (a node restarted or failed over and lost its script
// cache) are sent again once the scripts are loaded again. go-redis never
// re-sends an op whose reply was lost (a read timeout, a dropped
// connection), whatever the client's MaxRetries. The store itself sends
// again, a few times while ctx lasts, a Claim, a Renew or a Get whose
// reply was lost, and any op that Redis refused before running it
// (TRYAGAIN, LOADING, CLUSTERDOWN and the like); for a Complete, a Release or
// a Forget whose reply was lost, the lost reply's error is the op's error.
//
// An OpForget says whether it deleted a result, which [Store.Forget]
// cannot (forgetting nothing is no error): when op.Err is nil,
// op.Result.Status is store.Completed if the key had a result (a value or a
// permanent error) and it was deleted, and zero if there was nothing to
// delete: the key was absent, expired, or released (a released key's
// record lives on, so that its fence keeps rising, and Scan lists it).
// Batch sets it whatever op.Result held before, so a caller may start each
// op at store.Completed and count the ops still there afterwards, as
// deleted, with any store: one that does not report it leaves it.
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
	parts := s.split(calls)
	if len(parts) > 1 {
		s.nSplit.Add(1)
	}
	for _, part := range parts {
		sent := time.Now()
		s.run(ctx, part)
		s.repeat(ctx, part, sent)
		now := time.Now()
		for _, c := range part {
			s.decode(c, now)
		}
		if s.waitN > 0 {
			s.unconfirmed(ctx, part)
		}
	}
}

// split cuts calls, in order, into runs whose bytes stay within
// Options.MaxBatchBytes, each to go out as its own pipeline (one after
// the other); a call larger than that goes alone.
func (s *Store) split(calls []call) [][]call {
	total := 0
	for _, c := range calls {
		total += c.size
	}
	if total <= s.maxBatch || s.maxBatch <= 0 {
		return [][]call{calls}
	}
	var parts [][]call
	start, bytes := 0, 0
	for i, c := range calls {
		if i > start && bytes+c.size > s.maxBatch {
			parts = append(parts, calls[start:i])
			start, bytes = i, 0
		}
		if c.size > s.maxBatch {
			s.nLone.Add(1)
		}
		bytes += c.size
	}
	return append(parts, calls[start:])
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
		s.again(ctx, calls, at)
	}
}

// again sends the calls at the indexes at once more, in one pipeline.
func (s *Store) again(ctx context.Context, calls []call, at []int) {
	sub := pick(calls, at)
	s.exec(ctx, sub)
	keep(calls, at, sub)
}

// exec sends calls: in one pipeline, or on a cluster client one pipeline
// per master (see execCluster).
func (s *Store) exec(ctx context.Context, calls []call) {
	if s.slots != nil {
		s.execCluster(ctx, calls)
		return
	}
	s.pipeline(ctx, s.c, true, calls)
}

// pipeline sends calls in one pipeline of p. When wait is set (p is one
// node's client, whose pipeline is one connection) and the store has
// Options.WaitReplicas, a pipeline that carries writes ends with WAIT (see
// wait.go).
func (s *Store) pipeline(ctx context.Context, p pipeliner, wait bool, calls []call) {
	pipe := p.Pipeline()
	writes := false
	for i := range calls {
		c := &calls[i]
		c.cmd = evalSha(ctx, c.sc, c.keys, c.args)
		writes = writes || confirms(c.op)
		_ = pipe.Process(ctx, noRetry{c.cmd})
	}
	var w *redis.Cmd
	if s.waitN > 0 && writes && wait {
		w = redis.NewCmd(ctx, "wait", s.waitN, s.waitMs)
		_ = pipe.Process(ctx, noRetry{w})
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	if s.waitN > 0 {
		s.confirm(calls, w)
	}
}

// pipeliner is a client that makes pipelines: a *redis.Client (a node's,
// or the store's own) or the store's *redis.ClusterClient.
type pipeliner interface{ Pipeline() redis.Pipeliner }

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

// ms turns a duration into whole milliseconds, rounding up so that no
// positive duration becomes zero.
func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }
