package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// Liveness records (store.Liveness) are rows of <table>_live, one per
// instance, timed by the database clock. The claim reads no liveness
// itself: the runtime reads it first (Live), and the claim names the
// holder it found dead ($7 of claimSQL); the statement takes the row over
// only if that owner still holds it, as it takes over a row whose lease
// ended. A beat also deletes the rows of instances gone for an hour, so
// the table holds about the instances started in the last hour.

var _ store.Liveness = (*Store)(nil)

// LiveTable returns the liveness table's SQL name, quoted (and qualified
// by Options.Schema when set), as Table does the keys': <table>_live.
// Drop it with the keys' table.
func (s *Store) LiveTable() string { return s.names.live }

// Beat implements [store.Liveness].
func (s *Store) Beat(ctx context.Context, instance string, ttl time.Duration) error {
	if instance == "" {
		return fmt.Errorf("%w: empty instance", store.ErrInvalidArgument)
	}
	if err := store.CheckDuration("liveness ttl", ttl); err != nil {
		return err
	}
	if s.isClosed() {
		return errClosed
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `WITH gone AS (
  DELETE FROM `+s.names.live+` WHERE live_until < clock_timestamp() - interval '1 hour')
INSERT INTO `+s.names.live+` (instance, live_until)
VALUES ($1, clock_timestamp() + $2::bigint * interval '1 microsecond')
ON CONFLICT (instance) DO UPDATE SET live_until = excluded.live_until`, instance, micros(ttl))
	return err
}

// Live implements [store.Liveness].
func (s *Store) Live(ctx context.Context, instance string) (bool, error) {
	if instance == "" {
		return false, fmt.Errorf("%w: empty instance", store.ErrInvalidArgument)
	}
	if s.isClosed() {
		return false, errClosed
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	var live bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+s.names.live+
		` WHERE instance = $1 AND live_until > clock_timestamp())`, instance).Scan(&live)
	return live, err
}

// deadArg is the claim's $7: NULL for no dead holder.
func deadArg(owner string) any {
	if owner == "" {
		return nil
	}
	return []byte(owner)
}
