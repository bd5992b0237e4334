package pgtx_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/pgstore"
)

// charge is a function that inserts one charge row for key and returns
// its id.
func charge(key, run string) func(context.Context, pgx.Tx) (int64, error) {
	return func(ctx context.Context, tx pgx.Tx) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO charges (key, run, amount) VALUES ($1, $2, 100) RETURNING id`, key, run).Scan(&id)
		return id, err
	}
}

func TestDoCommitsWorkWithTheResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	var seen idem.Claim
	id, err := pgtx.Do(bg, rt, e.work, "order-1", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		c, ok := idem.ClaimFrom(ctx)
		if !ok {
			t.Error("no claim in fn's context")
		}
		seen = c
		return charge("order-1", runID())(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen.Key != "order-1" || seen.Fence == 0 || seen.Attempt != 1 || seen.Takeover {
		t.Fatalf("claim = %+v, want key order-1, a fence, attempt 1, no takeover", seen)
	}
	var out idem.Outcome
	again, err := pgtx.Do(bg, rt, e.work, "order-1", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		t.Error("fn ran again")
		return 0, nil
	}, idem.WithOutcome(&out))
	if err != nil || again != id || out != idem.Replayed {
		t.Fatalf("second call = %d, %v (%v), want %d replayed", again, err, out, id)
	}
	// Another runtime (no cache) reads the stored record.
	rt2 := e.runtime(t, idem.Options{})
	got, err := idem.Do(bg, rt2, "order-1", notRun[int64](t))
	if err != nil || got != id {
		t.Fatalf("other instance = %d, %v, want %d", got, err, id)
	}
	e.wantRows(t, "order-1", 1)
}

// A function that commits or rolls back the transaction it was given is
// refused: a COMMIT committed its work without the key's record, the key
// was released, and every call ran it again (two calls, two rows); a
// deferred Rollback failed every completion.
func TestFnCannotEndItsTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	for range 2 {
		if _, err := pgtx.Do(bg, rt, e.work, "commits", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			id, err := charge("commits", runID())(ctx, tx)
			if err != nil {
				return 0, err
			}
			if err := tx.Commit(ctx); err == nil {
				t.Error("fn committed its transaction")
			}
			return id, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.wantRows(t, "commits", 1)
	if _, err := pgtx.Do(bg, rt, e.work, "defers", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		defer tx.Rollback(ctx)
		return charge("defers", runID())(ctx, tx)
	}); err != nil {
		t.Fatal(err)
	}
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	p, err := pgtx.Join(bg, rt, tx, "joined", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		defer tx.Rollback(ctx)
		return charge("joined", runID())(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Settle(tx.Commit(bg)); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "defers", 1)
	e.wantRows(t, "joined", 1)
}

func notRun[T any](t testing.TB) func(context.Context) (T, error) {
	return func(context.Context) (T, error) {
		t.Error("function ran, but it must not")
		var zero T
		return zero, nil
	}
}

func TestDoTransientErrorRollsBackAndReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	boom := errors.New("provider timeout")
	_, err := pgtx.Do(bg, rt, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		return 0, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the function's", err)
	}
	e.wantRows(t, "k", 0)
	var attempt int
	if _, err := pgtx.Do(bg, rt, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		c, _ := idem.ClaimFrom(ctx)
		attempt = c.Attempt
		return charge("k", runID())(ctx, tx)
	}); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 1)
	if attempt != 1 {
		t.Fatalf("attempt after a release = %d, want 1 (a release starts a new record)", attempt)
	}
}

func TestDoPanicRollsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	_, err := pgtx.Do(bg, rt, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		panic("bug")
	})
	var pe *idem.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PanicError", err)
	}
	e.wantRows(t, "k", 0)
}

func TestDoPermanentErrorIsStoredWithoutTheWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	declined := idem.Permanent(errors.New("card declined"))
	_, err := pgtx.Do(bg, rt, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		return 0, declined
	})
	if !idem.IsPermanent(err) {
		t.Fatalf("err = %v, want the permanent error", err)
	}
	e.wantRows(t, "k", 0)
	rt2 := e.runtime(t, idem.Options{})
	if _, err := idem.Do(bg, rt2, "k", notRun[int64](t)); !idem.IsPermanent(err) || err.Error() != "card declined" {
		t.Fatalf("replay = %v, want the stored permanent error", err)
	}
}

func TestKeepWorkCommitsTheWorkWithTheError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	_, err := pgtx.Do(bg, rt, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		return 0, pgtx.KeepWork(errors.New("refused, recorded"))
	})
	if !idem.IsPermanent(err) {
		t.Fatalf("err = %v, want a permanent error", err)
	}
	e.wantRows(t, "k", 1)
	rt2 := e.runtime(t, idem.Options{})
	if _, err := idem.Do(bg, rt2, "k", notRun[int64](t)); !idem.IsPermanent(err) || err.Error() != "refused, recorded" {
		t.Fatalf("replay = %v, want the stored error", err)
	}
	if pgtx.KeepWork(nil) != nil {
		t.Fatal("KeepWork(nil) is not nil")
	}
}

// Callers that arrive while the owner's transaction is open wait for its
// commit, and all get its value; the work happens once.
func TestDoDuplicatesWaitForTheCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	const n = 8
	var wg sync.WaitGroup
	ids := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = pgtx.Do(bg, rt, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
				started <- struct{}{}
				<-release
				return charge("k", runID())(ctx, tx)
			})
		}()
	}
	<-started
	idemtest.Eventually(t, "the duplicates to wait", func() bool { return rt.Stats().Waiters == n-1 })
	close(release)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("caller %d = %d, %v; caller 0 = %d", i, ids[i], errs[i], ids[0])
		}
	}
	e.wantRows(t, "k", 1)
}

// An owner whose lease ended while fn ran, and whose key another owner
// took and completed, gets ErrLeaseLost at its completion: its work never
// commits.
func TestDoTakenOverOwnerCommitsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	a := e.runtime(t, idem.Options{})
	b := e.runtime(t, idem.Options{})
	inFn := make(chan struct{})
	resume := make(chan struct{})
	var once sync.Once
	resumeA := func() { once.Do(func() { close(resume) }) }
	t.Cleanup(resumeA) // before the runtimes close: a failed test must not hang
	done := make(chan error, 1)
	go func() {
		_, err := pgtx.Do(bg, a, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			close(inFn)
			<-resume
			return charge("k", "first")(context.WithoutCancel(ctx), tx)
		}, idem.WithLease(300*time.Millisecond), idem.WithoutRenewal())
		done <- err
	}()
	<-inFn
	var c idem.Claim
	var id int64
	idemtest.Eventually(t, "the second owner to take the key over", func() bool {
		var err error
		id, err = pgtx.Do(bg, b, e.work, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			c, _ = idem.ClaimFrom(ctx)
			return charge("k", "second")(ctx, tx)
		}, idem.WithFailFast())
		return err == nil
	})
	if !c.Takeover || c.Attempt != 2 {
		t.Fatalf("second claim = %+v, want a takeover at attempt 2", c)
	}
	resumeA()
	if err := <-done; !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("first owner = %v, want ErrLeaseLost", err)
	}
	var run string
	if err := e.work.QueryRow(bg, `SELECT string_agg(run, ',') FROM charges WHERE key = 'k'`).Scan(&run); err != nil {
		t.Fatal(err)
	}
	if run != "second" {
		t.Fatalf("charges runs = %q, want only the second owner's", run)
	}
	got, err := idem.Do(bg, a, "k", notRun[int64](t))
	if err != nil || got != id {
		t.Fatalf("replay on the first instance = %d, %v, want %d", got, err, id)
	}
}

func TestRefusesAnotherDatabaseOrStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	other := newPool(t, shared.NewDatabase(t))
	_, err := pgtx.Do(bg, rt, other, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		t.Error("fn ran on another database")
		return 0, nil
	})
	if !errors.Is(err, pgstore.ErrOtherDatabase) {
		t.Fatalf("err = %v, want ErrOtherDatabase", err)
	}
	tx, err := other.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := pgtx.Join(bg, rt, tx, "k", charge("k", "x")); !errors.Is(err, pgstore.ErrOtherDatabase) {
		t.Fatalf("Join err = %v, want ErrOtherDatabase", err)
	}

	mem := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{})})
	if _, err := pgtx.Do(bg, mem, e.work, "k", charge("k", "x")); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("memstore runtime: err = %v, want ErrInvalidArgument", err)
	}
	if _, err := pgtx.Do(bg, rt, nil, "k", charge("k", "x")); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("nil pool: err = %v", err)
	}
	if _, err := pgtx.Do[int64](bg, rt, e.work, "k", nil); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("nil fn: err = %v", err)
	}
	if _, err := pgtx.Join(bg, rt, nil, "k", charge("k", "x")); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("nil tx: err = %v", err)
	}
	e.wantRows(t, "k", 0)
}

func TestJoinCommitsWithTheCallersTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(bg, `INSERT INTO charges (key, run, amount) VALUES ('audit', 'caller', 0)`); err != nil {
		t.Fatal(err)
	}
	p, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()))
	if err != nil {
		t.Fatal(err)
	}
	// Until the commit, a duplicate waits (settle) rather than replaying;
	// it gets fn's value once the commit is settled.
	type answer struct {
		v   int64
		out idem.Outcome
		err error
	}
	dup := make(chan answer, 1)
	go func() {
		var a answer
		a.v, a.err = idem.Do(bg, rt, "k", notRun[int64](t), idem.WithOutcome(&a.out))
		dup <- a
	}()
	idemtest.Eventually(t, "the duplicate to wait", func() bool { return rt.Stats().Waiters == 1 })
	id := p.Value()
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-dup:
		t.Fatalf("the duplicate was answered (%+v) before Settle", a)
	default:
	}
	got, err := p.Settle(nil)
	if err != nil || got != id {
		t.Fatalf("Settle = %d, %v, want %d", got, err, id)
	}
	if a := idemtest.Recv(t, dup); a.err != nil || a.v != id || a.out != idem.Joined {
		t.Fatalf("the duplicate = %+v, want %d joined", a, id)
	}
	e.wantRows(t, "k", 1)
	e.wantRows(t, "audit", 1)
}

func TestJoinRolledBackReleasesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()))
	if err != nil {
		t.Fatal(err)
	}
	rbErr := errors.New("caller rolled back")
	if err := tx.Rollback(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Settle(rbErr); !errors.Is(err, rbErr) {
		t.Fatalf("Settle = %v, want the caller's error", err)
	}
	e.wantRows(t, "k", 0)
	// The key was released: the next call runs.
	if _, err := pgtx.Do(bg, rt, e.work, "k", charge("k", runID())); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 1)
}

// Value answers fn's value before and after a Settle whose commit failed.
// Once both of its channels were closed, it chose between them at random.
func TestPendingValueAfterAFailedCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pgtx.Join(bg, rt, tx, "k", charge("k", runID()))
	if err != nil {
		t.Fatal(err)
	}
	id := p.Value()
	if err := tx.Rollback(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Settle(errors.New("rolled back")); err == nil {
		t.Fatal("Settle after a rollback succeeded")
	}
	for i := range 64 {
		if v := p.Value(); v != id {
			t.Fatalf("Value #%d after the failed commit = %d, before it %d", i, v, id)
		}
	}
}

// A transient error in Join rolls back fn's work to its savepoint and
// leaves the caller's own work in place.
func TestJoinTransientErrorKeepsTheCallersWork(t *testing.T) {
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
	boom := errors.New("boom")
	_, err = pgtx.Join(bg, rt, tx, "k", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := charge("k", runID())(ctx, tx); err != nil {
			return 0, err
		}
		return 0, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 0)
	e.wantRows(t, "audit", 1)
}

// A replayed key leaves the caller's transaction alone.
func TestJoinReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	id, err := pgtx.Do(bg, rt, e.work, "k", charge("k", runID()))
	if err != nil {
		t.Fatal(err)
	}
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	p, err := pgtx.Join(bg, rt, tx, "k", func(context.Context, pgx.Tx) (int64, error) {
		t.Error("fn ran")
		return 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Value() != id {
		t.Fatalf("Value = %d, want %d", p.Value(), id)
	}
	if got, err := p.Settle(errors.New("whatever")); err != nil || got != id {
		t.Fatalf("Settle = %d, %v", got, err)
	}
}

var _ = store.ErrLeaseLost

// While a Join's completion waits for the caller's commit, the key's row is
// locked: another instance's claim of it answers in progress and claims
// again after the lock timeout (it could not list its waiter for the
// commit's wake-up), and its other keys go on meanwhile.
func TestHeldRowDelaysOnlyItsKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	a := e.runtime(t, idem.Options{})
	b := idemtest.Runtime(t, idem.Options{Store: newStore(t, newPool(t, e.dsn))})
	tx, err := e.work.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	p, err := pgtx.Join(bg, a, tx, "k", charge("k", runID()))
	if err != nil {
		t.Fatal(err)
	}
	dup := make(chan error, 1)
	var got int64
	go func() {
		var err error
		got, err = idem.Do(bg, b, "k", notRun[int64](t))
		dup <- err
	}()
	// The other instance's other keys are served while "k" is held.
	for i := range 5 {
		key := "other-" + string(rune('a'+i))
		if _, err := idem.Do(bg, b, key, func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatalf("%s while k is held: %v", key, err)
		}
	}
	select {
	case err := <-dup:
		t.Fatalf("the duplicate returned (%v) before the commit", err)
	default:
	}
	id, err := p.Settle(tx.Commit(bg))
	if err != nil {
		t.Fatal(err)
	}
	if err := idemtest.Recv(t, dup); err != nil || got != id {
		t.Fatalf("duplicate on the other instance = %d, %v, want %d", got, err, id)
	}
}
