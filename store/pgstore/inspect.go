package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// Inspect implements [store.Inspector] with one read-only statement: the
// lease left is measured by the database clock, and a row is checked as
// every operation checks it, so a row the store cannot read is a
// *CorruptError naming the key. A released key, and a row that has ended,
// are Absent. Options.Timeout bounds the call.
func (s *Store) Inspect(ctx context.Context, key string) (store.Entry, error) {
	if err := store.ValidateKey(key); err != nil {
		return store.Entry{}, err
	}
	if s.isClosed() {
		return store.Entry{}, errClosed
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, s.q.get, []byte(key))
	if err != nil {
		return store.Entry{}, fmt.Errorf("pgstore: inspect %q: %w", key, err)
	}
	defer rows.Close()
	var r *row
	for rows.Next() {
		_, got, err := scanRow(rows)
		if err != nil {
			return store.Entry{}, &CorruptError{Key: key, Table: s.names.table, Reason: "cannot read it: " + err.Error()}
		}
		r = &got
	}
	if err := rows.Err(); err != nil {
		return store.Entry{}, fmt.Errorf("pgstore: inspect %q: %w", key, err)
	}
	if r == nil {
		return store.Entry{}, nil
	}
	if reason := r.check(); reason != "" {
		return store.Entry{}, &CorruptError{Key: key, Table: s.names.table, Reason: reason}
	}
	switch {
	case r.is("p"):
		return store.Entry{State: store.Held, Token: r.token(), LeaseLeft: max(r.leaseLeft(), 0),
			Fingerprint: r.fingerprint}, nil
	case r.done():
		rec := r.record(time.Now())
		return store.Entry{State: store.Done, Token: rec.Token, Record: rec}, nil
	}
	return store.Entry{}, nil
}
