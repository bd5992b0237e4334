package redisstore

import (
	"fmt"
	"time"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// decode turns a script's reply into op's result. A reply the op's script
// never sends is a *CorruptError, never read as the nearest outcome.
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
		op.Err = c.corrupt(r.str(1))
		return
	}
	if r.err != nil { // no code: never read it as 0 (lease lost, not found)
		op.Err = c.corrupt(r.err.Error())
		return
	}
	var known bool
	switch op.Kind {
	case store.OpClaim:
		known = decodeClaim(op, &r, code, now)
	case store.OpComplete:
		known = decodeComplete(op, &r, code, now)
	case store.OpRelease, store.OpRenew:
		known = decodeFenced(op, code)
	case store.OpGet:
		known = decodeGet(op, &r, code, now)
	case store.OpForget:
		known = decodeForget(op, code)
	}
	if !known {
		r.err = fmt.Errorf("unexpected %v reply %v", op.Kind, vals)
	}
	if r.err != nil && op.Err == nil {
		op.Err = c.corrupt(r.err.Error())
	}
}

// corrupt returns the *CorruptError of c's record.
func (c call) corrupt(reason string) error {
	return &CorruptError{Key: c.op.Key, RedisKey: c.keys[0], Reason: reason}
}

// The decoders of each script's reply codes (see scripts.go) set op's
// result or error, and report false for a code the script never sends.

func decodeClaim(op *store.Op, r *reply, code int64, now time.Time) bool {
	switch code {
	case 1:
		op.Result = store.ClaimResult{Status: store.Claimed,
			Token:     store.Token{Fence: r.uint(1), Owner: op.Claim.Owner},
			LeaseLeft: r.millis(2), Takeover: r.int(3) == 1, Attempt: r.attempt(4)}
	case 2:
		op.Result = store.ClaimResult{Status: store.Completed, Record: r.completed(1, now)}
	case 3:
		tok, left, fp := r.held(1, true)
		holder := tok.Owner
		tok.Owner = ""
		op.Result = store.ClaimResult{Status: store.InProgress, LeaseLeft: left, Token: tok, Fingerprint: fp, Holder: holder}
	default:
		return false
	}
	return true
}

func decodeComplete(op *store.Op, r *reply, code int64, now time.Time) bool {
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
		// A replay: what is stored (by this token: the script checked).
		op.Result.Record = r.completed(1, now)
	case 0:
		op.Err = store.ErrLeaseLost
	default:
		return false
	}
	return true
}

// decodeFenced reads the reply of a Release or a Renew.
func decodeFenced(op *store.Op, code int64) bool {
	switch code {
	case 1:
	case 0:
		op.Err = store.ErrLeaseLost
	default:
		return false
	}
	return true
}

func decodeGet(op *store.Op, r *reply, code int64, now time.Time) bool {
	switch code {
	case 2:
		op.Result.Record = r.completed(1, now)
	case 0:
		op.Err = store.ErrNotFound
	default:
		return false
	}
	return true
}

// decodeForget reads the reply of a Forget: see [Store.Batch] for what its
// Result.Status says.
func decodeForget(op *store.Op, code int64) bool {
	switch code {
	case 1:
		op.Result = store.ClaimResult{Status: store.Completed}
	case 0:
		op.Result = store.ClaimResult{}
	case 3:
		op.Result = store.ClaimResult{}
		op.Err = store.ErrInProgress
	default:
		return false
	}
	return true
}

// CorruptError reports a record in Redis that the store cannot read: a
// value garbled (written by hand, or by something else), a value of
// another format, or a Redis key that is no idem record at the record's
// name (another application's list or hash: Reason says "not a string:
// hash", "not a v3 record ...", ...). Every operation on such a key answers it
// without changing the key. It matches [store.ErrCorrupt] (errors.Is), so
// callers that do not import this package can tell it from a failure of
// Redis.
type CorruptError struct {
	Key      string // the key as given to the store
	RedisKey string // the record's key in Redis
	Reason   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("redisstore: record %s of key %s is corrupt: %s", e.RedisKey, keytext.Quote(e.Key), e.Reason)
}

// Is reports whether target is [store.ErrCorrupt].
func (e *CorruptError) Is(target error) bool { return target == store.ErrCorrupt }
