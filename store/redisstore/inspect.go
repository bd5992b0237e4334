package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

var _ store.Inspector = (*Store)(nil)

// Inspect implements [store.Inspector] with one read-only script: the lease
// left is measured by the server's clock (the record's PTTL), and a record is checked as
// Get checks it, so a record the store cannot read, or a Redis key of
// another type at the record's name, is a *CorruptError naming the key.
// A released key (its record kept to keep the fence rising) is Absent. The
// script writes nothing, so go-redis may send it again after a lost reply
// (the client's MaxRetries) without harm. Options.Timeout bounds the call.
func (s *Store) Inspect(ctx context.Context, key string) (store.Entry, error) {
	if err := store.ValidateKey(key); err != nil {
		return store.Entry{}, err
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	rk := s.RecordKey(key)
	vals, err := inspectScript.Run(ctx, s.c, []string{rk}).Slice()
	if err != nil {
		return store.Entry{}, fmt.Errorf("redisstore: inspect %s: %w", keytext.Quote(key), err)
	}
	e, err := decodeEntry(vals, time.Now())
	if err != nil {
		return store.Entry{}, &CorruptError{Key: key, RedisKey: rk, Reason: err.Error()}
	}
	return e, nil
}

// decodeEntry reads the inspect script's reply (see scripts.go); an error
// is the reason the record is corrupt.
func decodeEntry(vals []any, now time.Time) (store.Entry, error) {
	r := reply{vals: vals}
	code := r.int(0)
	if code == -1 {
		return store.Entry{}, fmt.Errorf("%s", r.str(1))
	}
	if r.err != nil {
		return store.Entry{}, r.err
	}
	var e store.Entry
	switch code {
	case 0:
	case 1:
		tok, left, fp := r.held(1, true)
		e = store.Entry{State: store.Held, Token: tok, LeaseLeft: left, Fingerprint: fp}
	case 2:
		rec := r.completed(1, now)
		e = store.Entry{State: store.Done, Token: rec.Token, Record: rec}
	default:
		return store.Entry{}, fmt.Errorf("unexpected inspect reply %v", vals)
	}
	return e, r.err
}
