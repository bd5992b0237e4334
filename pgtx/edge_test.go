package pgtx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
)

// settings returns the three timeouts CompleteIn sets, as q sees them.
func settings(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) [3]string {
	t.Helper()
	var s [3]string
	err := q.QueryRow(bg, `SELECT current_setting('idle_in_transaction_session_timeout'),
		current_setting('statement_timeout'), current_setting('lock_timeout')`).Scan(&s[0], &s[1], &s[2])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The timeouts the completion sets hold for its transaction only (SET
// LOCAL): the pool's connection, back in the pool after the commit, has
// the server's settings again. In a Join, the caller's transaction has
// them (at most the lease) until it ends.
func TestTimeoutsEndWithTheTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // every call gets the connection the last one used
	one, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	before := settings(t, one)
	if _, err := pgtx.Do(bg, rt, one, "k", charge("k", runID()), idem.WithLease(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if after := settings(t, one); after != before {
		t.Fatalf("the pool's connection after pgtx.Do has %v, before %v", after, before)
	}

	tx, err := one.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pgtx.Join(bg, rt, tx, "j", charge("j", runID()), idem.WithLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if in := settings(t, tx); in != [3]string{"1s", "1s", "1s"} {
		t.Errorf("the caller's transaction after Join has %v, want half the lease (1s) each", in)
	}
	if _, err := p.Settle(tx.Commit(bg)); err != nil {
		t.Fatal(err)
	}
	if after := settings(t, one); after != before {
		t.Fatalf("the pool's connection after Join's commit has %v, before %v", after, before)
	}
}

// A call with another fingerprint than the key's stored result gets
// ErrFingerprintMismatch from Do and Join, without running fn or touching
// the caller's transaction.
func TestFingerprintMismatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	if _, err := pgtx.Do(bg, rt, e.work, "k", charge("k", runID()), idem.WithFingerprint([]byte("a"))); err != nil {
		t.Fatal(err)
	}
	other := idem.WithFingerprint([]byte("b"))
	ran := func(context.Context, pgx.Tx) (int64, error) {
		t.Error("fn ran under another fingerprint")
		return 0, nil
	}
	if _, err := pgtx.Do(bg, rt, e.work, "k", ran, other); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("Do = %v, want ErrFingerprintMismatch", err)
	}
	// Another instance, with nothing cached: the stored record answers.
	rt2 := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := pgtx.Join(bg, rt2, tx, "k", ran, other); !errors.Is(err, idem.ErrFingerprintMismatch) {
		t.Fatalf("Join = %v, want ErrFingerprintMismatch", err)
	}
	if _, err := tx.Exec(bg, `SELECT 1`); err != nil {
		t.Fatalf("the caller's transaction after the mismatch: %v", err)
	}
	e.wantRows(t, "k", 1)
}

// ClaimFrom in pgtx after a Forget: a new record, attempt 1, not a
// takeover, and a fence above the forgotten record's.
func TestClaimAfterAForget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	var claims []idem.Claim
	fn := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		c, _ := idem.ClaimFrom(ctx)
		claims = append(claims, c)
		return charge("k", runID())(ctx, tx)
	}
	if _, err := pgtx.Do(bg, rt, e.work, "k", fn); err != nil {
		t.Fatal(err)
	}
	if err := rt.Forget(bg, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgtx.Do(bg, rt, e.work, "k", fn); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 2 {
		t.Fatalf("fn ran %d times, want 2", len(claims))
	}
	a, b := claims[0], claims[1]
	if a.Attempt != 1 || b.Attempt != 1 || a.Takeover || b.Takeover || b.Fence <= a.Fence || b.Key != "k" {
		t.Fatalf("claims %+v then %+v; want attempt 1 each, no takeover, a rising fence", a, b)
	}
}

// A caller whose own work goes on past half the lease after Join, busy
// (never idle for as long), and then commits: Settle reports the commit,
// read back once the caller's transaction ended.
func TestJoinCallerCommitsAfterTheWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	const lease = 2 * time.Second // the wait: 1s
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	p, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()), idem.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	for range 6 { // 1.5s, never idle for long
		if _, err := tx.Exec(bg, `SELECT pg_sleep(0.25)`); err != nil {
			t.Fatal(err)
		}
	}
	id, err := p.Settle(tx.Commit(bg))
	if err != nil || id != p.Value() {
		t.Fatalf("Settle = %d, %v, want %d", id, err, p.Value())
	}
	e.wantRows(t, "k", 1)
	if got, err := idem.Do(bg, rt, "k", notRun[int64](t)); err != nil || got != id {
		t.Fatalf("a later call = %d, %v, want %d replayed", got, err, id)
	}
}

// A permanent error marked KeepWork, returned by a function whose
// transaction a failed statement aborted (the usual way to learn of a
// duplicate: the INSERT's unique violation), has no work left to keep: the
// error is still the key's result, stored alone, and replayed.
func TestKeepWorkAfterAFailedStatement(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	dup := errors.New("already charged")
	runs := 0
	fn := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		runs++
		if _, err := tx.Exec(ctx, `INSERT INTO charges (key, run, amount) VALUES ('k', 'x', 'not a number')`); err == nil {
			t.Error("the bad insert succeeded")
		}
		return 0, pgtx.KeepWork(dup)
	}
	_, err := pgtx.Do(bg, rt, e.work, "k", fn)
	if err == nil || err.Error() != dup.Error() || !idem.IsPermanent(err) {
		t.Fatalf("first call = %v, want the permanent error", err)
	}
	_, err = pgtx.Do(bg, rt, e.work, "k", fn)
	if err == nil || err.Error() != dup.Error() {
		t.Fatalf("second call = %v, want the stored error replayed", err)
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times, want 1", runs)
	}
}

// The same in Join: the error is stored alone, fn's savepoint rolled back,
// and the caller's transaction, usable again, commits its own work.
func TestJoinKeepWorkAfterAFailedStatement(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	dup := errors.New("already charged")
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, `INSERT INTO charges (key, run, amount) VALUES ('audit', 'caller', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err = pgtx.Join(bg, rt, tx, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		_, _ = tx.Exec(ctx, `INSERT INTO charges (key, run, amount) VALUES ('k', 'x', 'not a number')`)
		return 0, pgtx.KeepWork(dup)
	})
	if err == nil || err.Error() != dup.Error() || !idem.IsPermanent(err) {
		t.Fatalf("Join = %v, want the permanent error", err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatalf("the caller's commit: %v", err)
	}
	e.wantRows(t, "audit", 1)
	if _, err := idem.Do(bg, rt, "k", notRun[int64](t)); err == nil || err.Error() != dup.Error() {
		t.Fatalf("a later call = %v, want the stored error", err)
	}
}

// A panic in Join's fn rolls its work back to the savepoint and releases
// the key; the caller gets a *PanicError and its transaction goes on.
func TestJoinPanicKeepsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, `INSERT INTO charges (key, run, amount) VALUES ('audit', 'caller', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err = pgtx.Join(bg, rt, tx, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		panic("boom")
	})
	var pe *idem.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Join = %v, want a *PanicError", err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 0)
	e.wantRows(t, "audit", 1)
	if _, err := pgtx.Do(bg, rt, e.work, "k", charge("k", runID())); err != nil {
		t.Fatalf("the key after the panic: %v", err)
	}
}

// A work pool whose transactions default to another isolation than READ
// COMMITTED (default_transaction_isolation set on the pool, the role or
// the database) is refused before fn runs: the completion would refuse
// every transaction of it, after fn's work and effects, and release the
// key for a rerun that fails the same way.
func TestDoRefusesAPoolAtAnotherIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	ser, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ser.Close)
	runs := 0
	fn := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		runs++
		return charge("k", runID())(ctx, tx)
	}
	for range 2 {
		if _, err := pgtx.Do(bg, rt, ser, "k", fn); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("Do on a serializable pool = %v, want ErrInvalidArgument", err)
		}
	}
	if runs != 0 {
		t.Fatalf("fn ran %d times on a pool whose transactions cannot complete", runs)
	}
	// The same database through the tests' pool still works.
	if _, err := pgtx.Do(bg, rt, e.work, "k", fn); err != nil || runs != 1 {
		t.Fatalf("Do on a read committed pool = %v, %d runs", err, runs)
	}
}

// A Join caller that never commits, rolls back nor settles (it forgot its
// transaction, idle): the server ends the transaction half a lease after
// it went idle, the runtime reads the record back, finds nothing
// committed and releases the key, which the next call runs; a late Settle
// answers that nothing committed.
func TestJoinNeverSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	p, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()), idem.WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	v, err := pgtx.Do(bg, rt, e.work, "k", charge("k", "next"), idem.WithSettle(10*time.Second))
	if err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if _, err := p.Settle(nil); err == nil {
		t.Fatal("a Settle after the server ended the transaction reported a commit")
	}
	var runs string
	if err := e.work.QueryRow(bg, `SELECT string_agg(run, ',') FROM charges WHERE key = 'k'`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != "next" {
		t.Fatalf("rows by %q, want only the next call's", runs)
	}
	if got, err := idem.Do(bg, rt, "k", notRun[int64](t)); err != nil || got != v {
		t.Fatalf("replay = %d, %v, want %d", got, err, v)
	}
}

// The runtime renews the lease of a pgtx.Do function that runs for
// several leases: another instance's call waits for it instead of taking
// the key over, and gets its committed value.
func TestDoRenewsALongFunction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	a := e.runtime(t, idem.Options{})
	b := e.runtime(t, idem.Options{})
	// Renewed every third of it: a lease of 600ms failed once when the
	// renewal came more than 400ms late on a loaded machine.
	const lease = 1500 * time.Millisecond
	inFn := make(chan struct{})
	type answer struct {
		v   int64
		err error
	}
	first := make(chan answer, 1)
	go func() {
		var r answer
		r.v, r.err = pgtx.Do(bg, a, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			close(inFn)
			time.Sleep(3 * lease)
			if ctx.Err() != nil {
				return 0, context.Cause(ctx)
			}
			return charge("k", "first")(ctx, tx)
		}, idem.WithLease(lease))
		first <- r
	}()
	<-inFn
	time.Sleep(lease) // the first lease is over: only its renewals hold the key
	var out idem.Outcome
	v, err := pgtx.Do(bg, b, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		t.Error("the other instance ran fn while the first held the key")
		return charge("k", "second")(ctx, tx)
	}, idem.WithLease(lease), idem.WithSettle(10*time.Second), idem.WithOutcome(&out))
	r := <-first
	if r.err != nil || err != nil || v != r.v || out == idem.Executed {
		t.Fatalf("first = %+v; other instance = %d, %v (%v); want the first's value, not run again", r, v, err, out)
	}
	e.wantRows(t, "k", 1)
}
