package pgstore

import (
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemrt/idem/store"
)

// fate is what became of a batch sent to the server.
type fate uint8

const (
	// committed: every statement ran and the transaction committed.
	committed fate = iota
	// refused: the server answered with an error, so the transaction
	// rolled back: none of the batch took effect.
	refused
	// notSent: the batch never reached the server (no connection).
	notSent
	// lost: the reply was lost (a dropped connection, a deadline): the
	// transaction may or may not have committed.
	lost
)

// notSentError is the error of a batch that found no connection.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

func fateOf(err error) fate {
	var ns *notSentError
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return committed
	case errors.As(err, &ns) || pgconn.SafeToRetry(err):
		return notSent
	case errors.As(err, &pgErr):
		// An error response aborts the implicit transaction of the
		// batch; the commit happens at its end, after every statement.
		return refused
	}
	return lost
}

// transient reports whether the server refused a batch for a reason that
// may pass: a conflict between transactions (class 40: serialization,
// deadlock), too few resources (53), an operator's intervention or a
// shutdown (57), a lost connection (08), a lock not available (55P03).
// Sending the batch again is safe whatever the reason: it did not run.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	for _, class := range []string{"40", "53", "57", "08"} {
		if strings.HasPrefix(pgErr.Code, class) {
			return true
		}
	}
	return pgErr.Code == "55P03"
}

// lockTimedOut reports whether the server refused a batch because a
// statement waited longer than lock_timeout for a row.
func lockTimedOut(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// repeatable reports whether op, first sent age ago, may be sent again
// after a reply of it was lost, though a copy may have run:
//
//   - Claim. Its repeat has the same owner, and a claim answers the owner
//     that holds the key with Claimed and the same token. Nothing else can
//     end the claim a first copy made: another owner's claim finds its
//     lease live, Forget refuses a key in progress, the row lives at least
//     the lease, and the holder's own Complete, Release and Renew need the
//     token this claim has not returned yet. Only the end of the lease
//     lets another owner take the key over, so a claim is repeated only
//     within half a lease of its first send. A first copy that found the
//     key in progress or completed wrote at most its waiter. One thing is
//     lost: a first copy that took the key over is answered by the repeat
//     as the holder's replay, with Takeover false (see store.ClaimResult).
//   - Renew renews the lease of the holder's own token; a repeat renews it
//     again from a later moment, as the next renewal would, and answers
//     ErrLeaseLost only if the token no longer holds the key when it runs.
//     It too is repeated within half a lease.
//   - Get writes nothing.
//
// Complete, Release and Forget are not repeated: when another client's
// call runs between two copies, the repeat reports on what that call left,
// not on what the first copy did (a Release that released the key, after
// someone claimed it, would answer ErrLeaseLost). Their lost replies reach
// the caller as errors; the runtime repeats a Complete (a completion
// recognises its own token and replays the record) and a Release.
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
