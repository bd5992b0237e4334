package river_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	idemriver "github.com/idemrt/idem/consume/river"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/pgtx"
)

// form is one way of building the worker: plain (idem.Do) or
// transactional (pgtx.Join and JobCompleteTx).
type form struct {
	name string
	// worker builds a worker whose work is do, writing its effect with
	// the form's database handle.
	worker func(t *testing.T, e *env, opts idemriver.Options[ChargeArgs],
		do func(ctx context.Context, db dbExec, job *river.Job[ChargeArgs]) error) *idemriver.Worker[ChargeArgs]
}

var forms = []form{
	{"plain", func(t *testing.T, e *env, opts idemriver.Options[ChargeArgs],
		do func(context.Context, dbExec, *river.Job[ChargeArgs]) error) *idemriver.Worker[ChargeArgs] {
		w, err := idemriver.NewWorker(opts, func(ctx context.Context, job *river.Job[ChargeArgs]) error {
			return do(ctx, e.work, job)
		})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}},
	{"tx", func(t *testing.T, e *env, opts idemriver.Options[ChargeArgs],
		do func(context.Context, dbExec, *river.Job[ChargeArgs]) error) *idemriver.Worker[ChargeArgs] {
		w, err := idemriver.NewTxWorker(testCtx(t), e.work, opts, func(ctx context.Context, tx pgx.Tx, job *river.Job[ChargeArgs]) error {
			return do(ctx, tx, job)
		})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}},
}

// run registers w and starts a River client working e's jobs.
func (e *env) run(t *testing.T, w river.Worker[ChargeArgs]) *river.Client[pgx.Tx] {
	t.Helper()
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		t.Fatal(err)
	}
	return start(t, e.river, config(workers))
}

// A job inserted twice (two jobs, one key, even with different args) is
// applied once: the second job replays the first's result and completes.
func TestDuplicateJobsAppliedOnce(t *testing.T) {
	t.Parallel()
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var verdicts sync.Map // job id → verdict
			w := f.worker(t, e, idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt),
				OnVerdict: func(job *river.Job[ChargeArgs], v consume.Verdict) { verdicts.Store(job.ID, v) }},
				func(ctx context.Context, db dbExec, job *river.Job[ChargeArgs]) error {
					return effect(ctx, db, job.Args.Order, job.Args.Note)
				})
			ins := e.inserter(t)
			key := order()
			first := insert(t, ins, ChargeArgs{Order: key, Note: "first"})
			second := insert(t, ins, ChargeArgs{Order: key, Note: "second"})
			c := e.run(t, w)
			e.state(t, c, first, rivertype.JobStateCompleted)
			e.state(t, c, second, rivertype.JobStateCompleted)
			if n := e.effects(t, key); n != 1 {
				t.Fatalf("%d effects for two jobs of one key; want 1", n)
			}
			var replayed int
			for _, id := range []int64{first, second} {
				v, ok := verdicts.Load(id)
				if !ok {
					t.Fatalf("job %d has no verdict", id)
				}
				if v.(consume.Verdict).Replayed() {
					replayed++
				}
			}
			if replayed != 1 {
				t.Fatalf("%d of the two jobs replayed; want 1", replayed)
			}
		})
	}
}

// A transient error is returned to River, which retries the job: the retry
// runs the work again (the transactional form's first effect rolled back).
func TestTransientErrorRetried(t *testing.T) {
	t.Parallel()
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var mu sync.Mutex
			var attempts []int
			w := f.worker(t, e, idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt)},
				func(ctx context.Context, db dbExec, job *river.Job[ChargeArgs]) error {
					mu.Lock()
					attempts = append(attempts, job.Attempt)
					mu.Unlock()
					if job.Attempt == 1 {
						if f.name == "tx" {
							// Made, then rolled back with the error.
							if err := effect(ctx, db, job.Args.Order, "failed"); err != nil {
								return err
							}
						}
						return errors.New("the payment provider is down")
					}
					return effect(ctx, db, job.Args.Order, "retry")
				})
			key := order()
			id := insert(t, e.inserter(t), ChargeArgs{Order: key})
			c := e.run(t, w)
			job := e.state(t, c, id, rivertype.JobStateCompleted)
			if job.Attempt != 2 || len(job.Errors) != 1 {
				t.Fatalf("job completed at attempt %d with errors %v; want attempt 2 after one error", job.Attempt, job.Errors)
			}
			if n := e.effects(t, key); n != 1 {
				t.Fatalf("%d effects; want 1", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(attempts) != 2 {
				t.Fatalf("the work ran at attempts %v; want 1 and 2", attempts)
			}
		})
	}
}

// A permanent error cancels the job, and a later job of the key is
// cancelled with the stored error without running the work.
func TestPermanentErrorCancels(t *testing.T) {
	t.Parallel()
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var mu sync.Mutex
			runs := 0
			w := f.worker(t, e, idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt)},
				func(ctx context.Context, db dbExec, job *river.Job[ChargeArgs]) error {
					mu.Lock()
					runs++
					mu.Unlock()
					if err := effect(ctx, db, job.Args.Order, "refused"); err != nil {
						return err
					}
					return idem.Permanent(errors.New("card declined"))
				})
			key := order()
			ins := e.inserter(t)
			id := insert(t, ins, ChargeArgs{Order: key})
			c := e.run(t, w)
			job := e.state(t, c, id, rivertype.JobStateCancelled)
			if job.Attempt != 1 {
				t.Fatalf("cancelled at attempt %d; want 1", job.Attempt)
			}
			later := insert(t, ins, ChargeArgs{Order: key, Note: "later"})
			e.state(t, c, later, rivertype.JobStateCancelled)
			mu.Lock()
			defer mu.Unlock()
			if runs != 1 {
				t.Fatalf("the work ran %d times; want 1 (the later job replays the error)", runs)
			}
			// The plain form keeps the effect made before the error; the
			// transactional form rolls it back with the error.
			want := map[string]int{"plain": 1, "tx": 0}[f.name]
			if n := e.effects(t, key); n != want {
				t.Fatalf("%d effects; want %d", n, want)
			}
		})
	}
}

// A job without a key is cancelled, never run.
func TestNoKeyCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, err := idemriver.NewWorker(idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt), Logger: quiet},
		func(context.Context, *river.Job[ChargeArgs]) error {
			t.Error("a job without a key ran")
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	id := insert(t, e.inserter(t), ChargeArgs{}) // no order
	c := e.run(t, w)
	e.state(t, c, id, rivertype.JobStateCancelled)
}

// A job whose key is held by a run in flight elsewhere is snoozed (no
// attempt used up) and completes once the run has stored its result,
// replaying it.
func TestHeldKeySnoozes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := order()
	c := consumer(t, e.rt)
	ik, err := consume.Key(ChargeArgs{}.Kind(), key)
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	held := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.Do(context.Background(), e.rt, ik, func(ctx context.Context) (struct{}, error) {
			close(held)
			<-gate
			return struct{}{}, effect(ctx, e.work, key, "elsewhere")
		})
		done <- err
	}()
	<-held
	var snoozed sync.Once
	snooze := make(chan struct{})
	w, err := idemriver.NewWorker(idemriver.Options[ChargeArgs]{Consumer: c,
		OnVerdict: func(_ *river.Job[ChargeArgs], v consume.Verdict) {
			if errors.Is(v.Err, idem.ErrConflict) {
				snoozed.Do(func() { close(snooze) })
			}
		}},
		func(ctx context.Context, job *river.Job[ChargeArgs]) error {
			return effect(ctx, e.work, key, "job")
		})
	if err != nil {
		t.Fatal(err)
	}
	id := insert(t, e.inserter(t), ChargeArgs{Order: key})
	rc := e.run(t, w)
	idemtest.Recv(t, snooze)
	close(gate)
	if err := idemtest.Recv(t, done); err != nil {
		t.Fatal(err)
	}
	job := e.state(t, rc, id, rivertype.JobStateCompleted)
	if len(job.Errors) != 0 {
		t.Fatalf("the job recorded errors %v; a snooze records none", job.Errors)
	}
	if n := e.effects(t, key); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
}

// Misconfigurations are errors, not panics.
func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	work := func(context.Context, *river.Job[ChargeArgs]) error { return nil }
	c := consumer(t, e.rt)
	for name, err := range map[string]error{
		"nil consumer": func() error {
			_, err := idemriver.NewWorker(idemriver.Options[ChargeArgs]{}, work)
			return err
		}(),
		"zero consumer": func() error {
			_, err := idemriver.NewWorker(idemriver.Options[ChargeArgs]{Consumer: &consume.Consumer{}}, work)
			return err
		}(),
		"nil work": func() error {
			_, err := idemriver.NewWorker(idemriver.Options[ChargeArgs]{Consumer: c}, nil)
			return err
		}(),
		"no key": func() error {
			_, err := idemriver.NewWorker(idemriver.Options[plainArgs]{Consumer: c},
				func(context.Context, *river.Job[plainArgs]) error { return nil })
			return err
		}(),
		"tx nil pool": func() error {
			_, err := idemriver.NewTxWorker(testCtx(t), nil, idemriver.Options[ChargeArgs]{Consumer: c},
				func(context.Context, pgx.Tx, *river.Job[ChargeArgs]) error { return nil })
			return err
		}(),
		"tx memory store": func() error {
			rt := idemtest.Runtime(t, idem.Options{})
			_, err := idemriver.NewTxWorker(testCtx(t), e.work, idemriver.Options[ChargeArgs]{Consumer: consumer(t, rt)},
				func(context.Context, pgx.Tx, *river.Job[ChargeArgs]) error { return nil })
			return err
		}(),
	} {
		if !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v; want an error matching idem.ErrInvalidArgument", name, err)
		}
	}
	// A zero Worker answers an error, it does not panic.
	var w idemriver.Worker[ChargeArgs]
	if err := w.Work(testCtx(t), &river.Job[ChargeArgs]{JobRow: &rivertype.JobRow{}}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("zero Worker: %v", err)
	}
	// A key from a function, for args without IdempotencyKey.
	if _, err := idemriver.NewWorker(idemriver.Options[plainArgs]{Consumer: c,
		Key: func(j *river.Job[plainArgs]) string { return j.Args.ID }},
		func(context.Context, *river.Job[plainArgs]) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// plainArgs has no IdempotencyKey method.
type plainArgs struct {
	ID string `json:"id"`
}

func (plainArgs) Kind() string { return "plain" }

// With Fingerprint, a job whose key was used with other args is cancelled
// with idem.ErrFingerprintMismatch instead of replaying the other job's
// result.
func TestFingerprintMismatchCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var verdicts sync.Map
	w, err := idemriver.NewWorker(idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt), Fingerprint: true, Logger: quiet,
		OnVerdict: func(job *river.Job[ChargeArgs], v consume.Verdict) { verdicts.Store(job.ID, v) }},
		func(ctx context.Context, job *river.Job[ChargeArgs]) error {
			return effect(ctx, e.work, job.Args.Order, job.Args.Note)
		})
	if err != nil {
		t.Fatal(err)
	}
	key := order()
	ins := e.inserter(t)
	first := insert(t, ins, ChargeArgs{Order: key, Note: "ten euros"})
	c := e.run(t, w)
	e.state(t, c, first, rivertype.JobStateCompleted)
	same := insert(t, ins, ChargeArgs{Order: key, Note: "ten euros"})
	e.state(t, c, same, rivertype.JobStateCompleted)
	other := insert(t, ins, ChargeArgs{Order: key, Note: "a hundred euros"})
	e.state(t, c, other, rivertype.JobStateCancelled)
	if v, _ := verdicts.Load(other); v == nil || !errors.Is(v.(consume.Verdict).Err, idem.ErrFingerprintMismatch) {
		t.Fatalf("the job with other args: verdict %+v; want idem.ErrFingerprintMismatch", v)
	}
	if n := e.effects(t, key); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
}

// In the transactional form, a permanent error marked pgtx.KeepWork
// commits the work with the stored error, and the job is cancelled (not
// completed in the transaction).
func TestTxKeepWorkCancels(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w, err := idemriver.NewTxWorker(testCtx(t), e.work, idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt), Logger: quiet},
		func(ctx context.Context, tx pgx.Tx, job *river.Job[ChargeArgs]) error {
			if err := effect(ctx, tx, job.Args.Order, "refusal recorded"); err != nil {
				return err
			}
			return pgtx.KeepWork(idem.Permanent(errors.New("card declined")))
		})
	if err != nil {
		t.Fatal(err)
	}
	key := order()
	id := insert(t, e.inserter(t), ChargeArgs{Order: key})
	c := e.run(t, w)
	e.state(t, c, id, rivertype.JobStateCancelled)
	if n := e.effects(t, key); n != 1 {
		t.Fatalf("%d effects; want the kept one", n)
	}
	rec, err := e.rt.State(testCtx(t), mustKey(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != idem.KeyFailed {
		t.Fatalf("the key is %v; want its error stored", rec.Status)
	}
}

func mustKey(t *testing.T, key string) string {
	t.Helper()
	k, err := consume.Key(ChargeArgs{}.Kind(), key)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// slowWorker sets a timeout of its own over a Worker, as the Worker's
// documentation says: by embedding it.
type slowWorker struct {
	*idemriver.Worker[ChargeArgs]
}

func (slowWorker) Timeout(*river.Job[ChargeArgs]) time.Duration { return time.Hour }

var _ river.Worker[ChargeArgs] = slowWorker{}
