package pgstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem/store"
)

// call is one op turned into a statement.
type call struct {
	op   *store.Op
	sql  string
	args []any
	// w and s are the rows the statement returned (see sql.go): the row
	// as written, and the row as the snapshot saw it; nil when absent.
	w, s *row
	// scanErr is set when a row of the reply could not be read.
	scanErr error
	// sent is when the call was first sent.
	sent time.Time
	// unsure is set once a reply of the call was lost: a copy of it may
	// have run (see repeatable).
	unsure bool
	// sub and digest are set on a claim whose waiter is a subscription
	// of this store: the subscription learns which key the digest names.
	sub    *subscription
	digest string
}

// maxChannel is the longest channel name NOTIFY takes, in bytes.
const maxChannel = 63

// prepare validates op and builds its statement; it sets op.Err and
// returns false for an op that must not reach the server.
func (s *Store) prepare(op *store.Op) (*call, bool) {
	op.Err, op.Result = nil, store.ClaimResult{}
	if err := store.ValidateKey(op.Key); err != nil {
		op.Err = err
		return nil, false
	}
	key := []byte(op.Key)
	c := &call{op: op}
	switch op.Kind {
	case store.OpClaim:
		r := op.Claim
		if op.Err = store.CheckClaim(r); op.Err == nil {
			op.Err = checkWaiter(r.Waiter)
		}
		c.sql = s.q.claim
		c.args = []any{key, []byte(r.Owner), micros(r.Lease), micros(r.Lease + r.TTL), r.Fingerprint, r.Waiter, deadArg(r.Dead)}
	case store.OpComplete:
		op.Err = store.CheckDuration("ttl", op.TTL)
		st, res := "c", op.Record.Value
		if op.Record.Failed {
			st, res = "f", []byte(op.Record.Error)
		}
		c.sql = s.q.finish
		c.args = []any{key, []byte(op.Token.Owner), int64(op.Token.Fence), st, res, op.Record.Fingerprint,
			micros(op.TTL), digest(op.Key)}
	case store.OpRelease:
		c.sql = s.q.finish
		c.args = []any{key, []byte(op.Token.Owner), int64(op.Token.Fence), "r", nil, nil, int64(0), digest(op.Key)}
	case store.OpRenew:
		op.Err = store.CheckDuration("lease", op.Lease)
		c.sql = s.q.renew
		c.args = []any{key, []byte(op.Token.Owner), int64(op.Token.Fence), micros(op.Lease)}
	case store.OpGet:
		c.sql, c.args = s.q.get, []any{key}
	case store.OpForget:
		c.sql, c.args = s.q.forget, []any{key, s.invalChannel, keyPayload(op.Key)}
	default:
		op.Err = fmt.Errorf("%w: unknown op %v", store.ErrInvalidArgument, op.Kind)
	}
	return c, op.Err == nil
}

// checkWaiter refuses a waiter that cannot be a channel name: NOTIFY would
// fail, and with it the whole batch of the completing instance.
func checkWaiter(w string) error {
	if w == "" || (len(w) <= maxChannel && utf8.ValidString(w) && strings.IndexByte(w, 0) < 0) {
		return nil
	}
	return fmt.Errorf("%w: pgstore: waiter %q is not a channel name (at most %d bytes of UTF-8)", store.ErrInvalidArgument, w, maxChannel)
}

// micros turns a duration into whole microseconds, the database clock's
// resolution, rounding up so that no positive duration becomes zero.
func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

// Batch implements [store.Batcher]: the ops go out as one pgx.Batch, one
// round trip and one transaction, their statements in key order (ops on
// one key keep their order). Answers count only once the transaction has
// committed. See the package documentation for what happens to a batch
// that the server refuses, or whose reply is lost.
//
// An OpForget says whether it deleted a result, which [Store.Forget]
// cannot (forgetting nothing is no error): when op.Err is nil,
// op.Result.Status is store.Completed if the key had a result (a value or
// a permanent error) and it was deleted, and zero if there was nothing to
// delete (the key was absent, ended, or released: a released key's row
// stays until its end, so that its fence keeps rising).
func (s *Store) Batch(ctx context.Context, ops []*store.Op) {
	if s.isClosed() {
		for _, op := range ops {
			op.Err = errClosed
		}
		return
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	calls := make([]*call, 0, len(ops))
	for _, op := range ops {
		if c, ok := s.prepare(op); ok {
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return
	}
	slices.SortStableFunc(calls, func(a, b *call) int { return strings.Compare(a.op.Key, b.op.Key) })
	s.expectWakes(calls)
	s.exec(ctx, calls)
	s.settleWakes(calls)
}

// The store sends a batch again at most maxRepeats times after a failure,
// after firstRepeat, then twice as long before each next time; and a
// statement whose row changed under it (call.decode) at most maxTries
// times in all: at once the first time, then after a random pause of up
// to settlePause, twice as long each time (see settleWait). Sent again at
// once, claims of a key that others claim and release over and over meet
// the same churn every time, and would fail for it.
const (
	maxRepeats  = 3
	firstRepeat = 10 * time.Millisecond
	maxTries    = 10
	settlePause = time.Millisecond
)

// settleWait returns the pause before try number tries+1 of a statement
// whose row changed under it: none after the first try, then a random
// one of up to settlePause << (tries-2), so that statements that met in
// one instant spread out.
func settleWait(tries int) time.Duration {
	if tries < 2 {
		return 0
	}
	return rand.N(settlePause<<(tries-2)) + 1
}

// exec runs calls until each has an answer or an error.
func (s *Store) exec(ctx context.Context, calls []*call) {
	pending := calls
	wait := firstRepeat
	repeats, tries := 0, 0
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			fail(pending, err)
			return
		}
		start := time.Now()
		for _, c := range pending {
			if c.sent.IsZero() {
				c.sent = start
			}
		}
		at, err := s.send(ctx, pending)
		switch fateOf(err) {
		case committed:
			tries++
			var ok bool
			if pending, ok = s.unsettled(ctx, pending, tries); !ok {
				return
			}
			continue
		case refused:
			// The transaction rolled back: nothing ran.
			if lockTimedOut(err) && at != nil {
				// Another transaction holds at's row: a completion waiting
				// for its commit, most likely. at is answered now, and the
				// others go again at once, without it: waiting for that
				// row again (alone, or in every repeat of at) would hold
				// up every other key of the batch, and of its shard.
				s.heldRow(at, err)
				if pending = without(pending, at); len(pending) == 0 {
					return
				}
				continue
			}
			if len(pending) > 1 {
				// Alone, each call meets only its own row's trouble.
				for _, c := range pending {
					s.exec(ctx, []*call{c})
				}
				return
			}
			if !transient(err) {
				fail(pending, err)
				return
			}
		case notSent:
		case lost:
			for _, c := range pending {
				c.unsure = true
			}
		}
		if pending = keepRepeatable(pending, err); len(pending) == 0 {
			return
		}
		if repeats == maxRepeats || !sleep(ctx, wait) {
			fail(pending, err)
			return
		}
		wait *= 2
		repeats++
	}
}

// heldRow answers c, whose statement waited longer than the lock timeout
// for its row (err): a claim finds the key in progress (its holder's
// commit, or its rollback, decides it; the runtime claims again after
// the lock timeout, since this claim could not list its waiter for the
// wake-up), and any other op fails with err, which the runtime retries
// on its own schedule.
func (s *Store) heldRow(c *call, err error) {
	if c.op.Kind == store.OpClaim {
		c.op.Result = store.ClaimResult{Status: store.InProgress, LeaseLeft: s.lockWait}
		c.op.Err = nil
		return
	}
	fail([]*call{c}, err)
}

// without returns calls without c.
func without(calls []*call, c *call) []*call {
	out := make([]*call, 0, len(calls)-1)
	for _, x := range calls {
		if x != c {
			out = append(out, x)
		}
	}
	return out
}

// unsettled decodes the answers of a committed try (the tries-th) and
// returns the calls whose row changed under them, to be sent again after
// settleWait; false when exec is to stop (they have failed).
func (s *Store) unsettled(ctx context.Context, pending []*call, tries int) ([]*call, bool) {
	local := time.Now()
	var again []*call
	for _, c := range pending {
		if c.scanErr != nil {
			c.op.Err = &CorruptError{Key: c.op.Key, Table: s.names.table, Reason: "cannot read it: " + c.scanErr.Error()}
		} else if c.decode(local, s.names.table) == unsettled {
			again = append(again, c)
		}
	}
	if len(again) > 0 && tries == maxTries {
		fail(again, errUnsettled)
		return nil, false
	}
	if d := settleWait(tries); len(again) > 0 && d > 0 && !sleep(ctx, d) {
		fail(again, ctx.Err())
		return nil, false
	}
	return again, true
}

// keepRepeatable fails, with err, the calls whose reply may have been lost
// and that are not safe to send again, and returns the others.
func keepRepeatable(pending []*call, err error) []*call {
	var keep []*call
	for _, c := range pending {
		if c.unsure && !repeatable(c.op, time.Since(c.sent)) {
			fail([]*call{c}, err)
		} else {
			keep = append(keep, c)
		}
	}
	return keep
}

// fail gives every call err as its op's error.
func fail(calls []*call, err error) {
	for _, c := range calls {
		c.op.Err = fmt.Errorf("pgstore: %v %q: %w", c.op.Kind, c.op.Key, err)
	}
}

// sleep waits d, or less if ctx ends first; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// send runs calls as one pgx.Batch, one round trip and one transaction,
// and reads the rows of each. Its error is nil only when the transaction
// committed; with an error, it returns the call whose statement the error
// came from, when that is known.
func (s *Store) send(ctx context.Context, calls []*call) (*call, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, &notSentError{err}
	}
	defer conn.Release()
	b := &pgx.Batch{}
	// For the batch's transaction only: a row held by another transaction
	// (see Options.LockTimeout) stops a statement after that long.
	b.Queue(`SELECT set_config('lock_timeout', $1, true)`, s.lockTimeout)
	for _, c := range calls {
		b.Queue(c.sql, c.args...)
	}
	br := conn.SendBatch(ctx, b)
	_, first := br.Exec()
	var at *call
	for _, c := range calls {
		if first != nil {
			break
		}
		c.w, c.s, c.scanErr = nil, nil, nil
		rows, err := br.Query()
		if err != nil {
			first, at = err, c
			break
		}
		for rows.Next() {
			via, r, err := scanRow(rows)
			if err != nil {
				c.scanErr = err
				break
			}
			if via == "w" {
				c.w = &r
			} else {
				c.s = &r
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil && c.scanErr == nil {
			first, at = err, c
			break
		}
	}
	// Close reads the rest, up to the reply to the batch's Sync: the
	// commit.
	if err := br.Close(); first == nil {
		first = err
	}
	return at, first
}
