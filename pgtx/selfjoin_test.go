package pgtx_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
)

// A second Join of a key whose first Join waits in the same transaction
// for its commit (a batch of messages with a duplicate, handled in one
// transaction) is refused with ErrConflict, and the transaction goes on.
// It used to wait for the first's commit, which could not come: the
// server ended the caller's idle transaction after half the lease, the
// caller's own work and the first key's with it.
func TestJoinSameKeyTwiceInOneTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	p, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()), idem.WithLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()), idem.WithLease(2*time.Second)); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("the second Join = %v, want ErrConflict", err)
	}
	// Other keys join the transaction as before.
	p2, err := pgtx.Join(bg, rt, tx, "k2", charge("k2", runID()), idem.WithLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cerr := tx.Commit(bg)
	if cerr != nil {
		t.Fatalf("commit: %v", cerr)
	}
	if _, err := p.Settle(cerr); err != nil {
		t.Fatal(err)
	}
	if _, err := p2.Settle(cerr); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 1)
	e.wantRows(t, "k2", 1)
	// Once settled, the key is the transaction's no more: a Join in the
	// next one replays it.
	tx2, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(bg)
	p3, err := pgtx.Join(bg, rt, tx2, "k", charge("k", runID()))
	if err != nil || p3.Value() != p.Value() {
		t.Fatalf("Join in the next transaction = %v, %v; want %d replayed", p3, err, p.Value())
	}
}
