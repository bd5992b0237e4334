package pgtx_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/pgtx"
)

// A permanent error (stored alone: its work rolls back) whose store is
// down when fn returns is kept and stored once the store is back, as
// idem.Do keeps a finished result: fn ran once, and later calls get the
// stored error. pgtx used to try the store once, release the key, and run
// fn again on the next call (whose effects outside the transaction, a
// payment provider's refusal, happen again).
func TestPermanentErrorSurvivesAStoreOutage(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t, pgtest.Options{Durable: true})
	e := newEnv(t, srv)
	rt := e.runtime(t, idem.Options{})
	declined := errors.New("card declined")
	var runs atomic.Int32
	restarted := make(chan error, 1)
	fn := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		runs.Add(1)
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		if runs.Load() == 1 {
			srv.Kill() // the store is down as fn returns
			go func() {
				time.Sleep(500 * time.Millisecond)
				restarted <- srv.Restart()
			}()
		}
		return 0, idem.Permanent(declined)
	}
	_, err := pgtx.Do(bg, rt, e.work, "k", fn, idem.WithLease(2*time.Second))
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	// The owner learns at once that its result is not stored yet (as
	// idem.Do's does); the runtime keeps offering it.
	if !errors.Is(err, declined) && !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("first call = %v, want the error, or the store's", err)
	}
	_, err = pgtx.Do(bg, rt, e.work, "k", fn, idem.WithSettle(10*time.Second))
	if !errors.Is(err, declined) && (err == nil || err.Error() != declined.Error()) {
		t.Fatalf("second call = %v, want the stored error replayed", err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
}
