package pgstore

import (
	"context"
	"fmt"
	"time"
)

// Cleanup deletes the rows that have ended (a result past its TTL, a
// claim past its lease and TTL, a released key past the end of its last
// claim), in DELETE statements of at most Options.CleanupBatch rows each,
// oldest first, until none is left or ctx ends. It returns how many rows it
// deleted. A DELETE skips the rows that a transaction holds rather than
// waiting for them, so it never blocks the store's operations; a row so
// skipped goes with a later cleanup. Rows that have ended are absent to
// every operation whether or not they are deleted: cleanup only keeps the
// table small. Several instances may clean up at once.
func (s *Store) Cleanup(ctx context.Context) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.q.cleanup, s.cleanupBatch)
		if err != nil {
			return total, fmt.Errorf("pgstore: cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.cleanupBatch) {
			return total, nil
		}
	}
}

// startCleanup runs Cleanup every interval until Close. A cleanup that
// fails (the server away) is tried again at the next tick.
func (s *Store) startCleanup(every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopCleanup, s.cleanupDone = cancel, make(chan struct{})
	go func() {
		defer close(s.cleanupDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = s.Cleanup(ctx)
			}
		}
	}()
}
