package pgstore

import (
	"bytes"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemrt/idem/store"
)

// row is one row of a statement's result (see sql.go): the columns of the
// table, the statement's now, and the claim's flag about its snapshot.
type row struct {
	state       pgtype.Text
	fence       pgtype.Int8
	owner       []byte
	fingerprint []byte
	result      []byte
	resultNull  bool
	leaseUntil  pgtype.Timestamptz
	createdAt   pgtype.Timestamptz
	expiresAt   pgtype.Timestamptz
	attempt     pgtype.Int4
	now         pgtype.Timestamptz
	quiet       bool
}

// scanRow reads one result row; via is 'w' or 's'.
func scanRow(rows pgx.Rows) (via string, r row, err error) {
	var res []byte // nil for NULL, empty for an empty value
	err = rows.Scan(&via, &r.state, &r.fence, &r.owner, &r.fingerprint, &res,
		&r.leaseUntil, &r.createdAt, &r.expiresAt, &r.attempt, &r.now, &r.quiet)
	r.result, r.resultNull = res, res == nil
	return via, r, err
}

// check returns the reason r cannot be read as a row of the table, or "".
// Only what the store uses is checked: a row that has ended is absent
// whatever else it holds.
func (r *row) check() string {
	switch {
	case !finite(r.now):
		return "no statement time" // never: the statement sets it
	case !r.fence.Valid || r.fence.Int64 < 1:
		return fmt.Sprintf("fence %v is not a positive number", r.fence.Int64)
	case !finite(r.expiresAt):
		return "expires_at is missing or infinite"
	case !r.state.Valid:
		return "state is missing"
	}
	if !r.live() {
		return ""
	}
	// A claim's row lives its lease and then its TTL, each up to
	// MaxDuration; a result's, its TTL.
	limit := 2 * store.MaxDuration
	if r.state.String == "c" || r.state.String == "f" {
		limit = store.MaxDuration
	}
	if d := r.expiresAt.Time.Sub(r.now.Time); d > limit+time.Minute {
		return fmt.Sprintf("expires_at %v is beyond the %v limit", r.expiresAt.Time, limit)
	}
	switch r.state.String {
	case "p":
		if len(r.owner) == 0 {
			return "owner is missing"
		}
		if !finite(r.leaseUntil) {
			return "lease_until is missing or infinite"
		}
		if d := r.leaseUntil.Time.Sub(r.now.Time); d > store.MaxDuration+time.Minute || -d > store.MaxDuration {
			return fmt.Sprintf("lease_until %v is beyond the %v limit", r.leaseUntil.Time, store.MaxDuration)
		}
		if !r.attempt.Valid || r.attempt.Int32 < 1 {
			return fmt.Sprintf("attempt %v is not a positive number", r.attempt.Int32)
		}
	case "c", "f":
		if r.resultNull {
			return "result is missing"
		}
		if !finite(r.createdAt) {
			return "created_at is missing or infinite"
		}
		if d := r.now.Time.Sub(r.createdAt.Time); d > store.MaxDuration || -d > time.Minute {
			return fmt.Sprintf("created_at %v is beyond the %v limit", r.createdAt.Time, store.MaxDuration)
		}
	case "r":
	default:
		return fmt.Sprintf("state %q is none of p, c, f, r", r.state.String)
	}
	return ""
}

func finite(t pgtype.Timestamptz) bool {
	return t.Valid && t.InfinityModifier == pgtype.Finite
}

// live reports whether the row has not ended.
func (r *row) live() bool { return r.expiresAt.Time.After(r.now.Time) }

// is reports whether the row is live and in state st.
func (r *row) is(st string) bool { return r.live() && r.state.String == st }

// done reports whether the row is live and completed (c or f).
func (r *row) done() bool { return r.is("c") || r.is("f") }

// token returns the claim the row holds or was produced by.
func (r *row) token() store.Token {
	return store.Token{Fence: uint64(r.fence.Int64), Owner: string(r.owner)}
}

// heldBy reports whether the row is live, in progress, and held by tok.
func (r *row) heldBy(tok store.Token) bool { return r.is("p") && r.token() == tok }

// leaseLeft returns the holder's lease left at the statement's now.
func (r *row) leaseLeft() time.Duration { return r.leaseUntil.Time.Sub(r.now.Time) }

// record returns a completed row's record, with the times turned into
// local ones: the store reports times by the local clock, so that callers
// compare them with their own (local is when the reply came).
func (r *row) record(local time.Time) store.Record {
	rec := store.Record{Failed: r.state.String == "f", Fingerprint: r.fingerprint, Token: r.token(),
		CreatedAt: local.Add(-r.now.Time.Sub(r.createdAt.Time)),
		ExpiresAt: local.Add(r.expiresAt.Time.Sub(r.now.Time))}
	if rec.Failed {
		rec.Error = string(r.result)
	} else {
		rec.Value = r.result
	}
	return rec
}

// The answers of decode: an op's result (or contract error) is set; the
// row changed under the statement and it must be sent again; or the row
// is corrupt.
type verdict uint8

const (
	settled verdict = iota
	unsettled
)

// decode sets c's op result from the rows its statement returned, or
// reports that the statement must be sent again. See sql.go for why an
// answer is never taken from a snapshot that contradicts the write.
func (c *call) decode(local time.Time, table string) verdict {
	op := c.op
	op.Err = nil
	if op.Kind == store.OpForget && c.w != nil {
		// Deleted, whatever it held; a result if it was live and
		// completed (see Store.Batch).
		if c.w.done() {
			op.Result.Status = store.Completed
		}
		return settled
	}
	for _, r := range []*row{c.w, c.s} {
		if r == nil {
			continue
		}
		if reason := r.check(); reason != "" {
			op.Err = &CorruptError{Key: op.Key, Table: table, Reason: reason}
			return settled
		}
	}
	w, s := c.w, c.s
	switch op.Kind {
	case store.OpClaim:
		return decodeClaim(op, w, s, local)
	case store.OpComplete:
		return decodeComplete(op, w, s, local)
	case store.OpRelease:
		switch {
		case w != nil:
		case s != nil && s.heldBy(op.Token):
			return unsettled
		case s != nil && s.live() && s.state.String != "r":
			op.Err = store.ErrLeaseLost
		}
	case store.OpRenew:
		switch {
		case w != nil:
		case s != nil && s.heldBy(op.Token):
			return unsettled
		default:
			op.Err = store.ErrLeaseLost
		}
	case store.OpGet:
		if s != nil && s.done() {
			op.Result.Record = s.record(local)
		} else {
			op.Err = store.ErrNotFound
		}
	case store.OpForget:
		return decodeForget(op, w, s)
	}
	return settled
}

// decodeComplete reads a Complete's answer: w is the row it wrote, s the
// row its snapshot saw.
func decodeComplete(op *store.Op, w, s *row, local time.Time) verdict {
	switch {
	case w != nil:
		op.Result.Record = w.record(local)
		op.Result.Record.Token = op.Token
	case s != nil && s.done() && s.token() == op.Token:
		op.Result.Record = s.record(local) // a replay: what is stored
	case s != nil && s.heldBy(op.Token):
		return unsettled
	default:
		op.Err = store.ErrLeaseLost
	}
	return settled
}

// decodeForget reads a Forget's answer: w is the row it deleted, s the
// row its snapshot saw.
func decodeForget(op *store.Op, w, s *row) verdict {
	switch {
	case w != nil:
	case s != nil && s.is("p"):
		op.Err = store.ErrInProgress
	case s != nil && (s.done() || !s.live()):
		return unsettled
	}
	return settled
}

func decodeClaim(op *store.Op, w, s *row, local time.Time) verdict {
	owner := []byte(op.Claim.Owner)
	switch {
	case w != nil && bytes.Equal(w.owner, owner): // claimed: new, or taken over
		// Only a takeover counts an attempt above 1: the statement wrote
		// the taken row's attempt + 1 (a row of another owner, in
		// progress, whose lease had ended), whatever its snapshot saw.
		op.Result = store.ClaimResult{Status: store.Claimed, Token: w.token(), LeaseLeft: w.leaseLeft(),
			Attempt: uint32(w.attempt.Int32), Takeover: w.attempt.Int32 > 1}
	case w != nil: // in progress; the waiter is listed now
		op.Result = inProgress(w)
	case s == nil || !s.quiet:
		return unsettled
	case s.done():
		op.Result = store.ClaimResult{Status: store.Completed, Record: s.record(local)}
	case bytes.Equal(s.owner, owner): // the holder's own claim again
		op.Result = store.ClaimResult{Status: store.Claimed, Token: s.token(), Attempt: uint32(s.attempt.Int32),
			LeaseLeft: s.leaseLeft()}
	default:
		op.Result = inProgress(s)
	}
	return settled
}

func inProgress(r *row) store.ClaimResult {
	return store.ClaimResult{Status: store.InProgress, Token: store.Token{Fence: uint64(r.fence.Int64)},
		LeaseLeft: r.leaseLeft(), Fingerprint: r.fingerprint, Holder: string(r.owner)}
}
