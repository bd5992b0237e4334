package pgtx_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/pgtx"
)

// A COMMIT that gets no reply before its deadline (the server stalls right
// after the completion statement, past the completion's deadline) is
// settled by reading the record back once the server answers again:
// success if the commit went through, nothing stored if it did not. The
// read-back used the deadline the COMMIT had just run out of, so it never
// ran, and the caller got ErrStoreUnavailable whatever had committed.
// (Not parallel: it sets the package's after-statement hook.)
func TestCommitPastItsDeadlineIsReadBack(t *testing.T) {
	srv := pgtest.Start(t, pgtest.Options{})
	e := newEnv(t, srv)
	rt := e.runtime(t, idem.Options{})
	const lease = time.Second // hold: 500ms; the completion's deadline 2*hold+5s
	resumed := make(chan struct{})
	pgtx.SetAfterStatement(func() {
		pgtx.SetAfterStatement(nil)
		srv.Pause()
		go func() {
			defer close(resumed)
			time.Sleep(2*lease/2 + 5*time.Second + 500*time.Millisecond)
			srv.Resume()
		}()
	})
	t.Cleanup(func() { pgtx.SetAfterStatement(nil) })
	id, err := pgtx.Do(bg, rt, e.work, "k", charge("k", runID()), idem.WithLease(lease))
	<-resumed
	t.Logf("pgtx.Do = %d, %v", id, err)
	if errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("the outcome was not read back: %v", err)
	}
	var rows int
	for range 20 { // the pool's connections from before the pause may be gone
		var qerr error
		if rows, qerr = e.rowsErr("k"); qerr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	switch {
	case err == nil && rows != 1:
		t.Fatalf("success, but %d rows", rows)
	case err != nil && rows != 0:
		t.Fatalf("error %v, but %d rows committed", err, rows)
	}
	// Either way, the key ends with one run.
	if _, err := pgtx.Do(bg, rt, e.work, "k", charge("k", runID()), idem.WithSettle(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 1)
}
