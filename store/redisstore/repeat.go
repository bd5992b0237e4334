package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

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

// keep stores the replies of sub, picked from calls at at, in calls, and
// whether replicas confirmed them.
func keep(calls []call, at []int, sub []call) {
	for j, i := range at {
		calls[i].cmd = sub[j].cmd
		calls[i].unconfirmed = sub[j].unconfirmed
	}
}
