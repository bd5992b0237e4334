package river

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/internal/keytext"
)

// Keyed is implemented by job args that name their own idempotency key:
// the key of the effect the job makes (an order id, a payment id), the
// same for every job inserted for that effect. A Worker uses it when
// Options.Key is nil.
type Keyed interface {
	IdempotencyKey() string
}

// WorkFunc does a job's work: the effect to make once per key. An error
// marked idem.Permanent (or one the runtime's classifier calls permanent)
// is stored and cancels the job (river.JobCancel); any other error is
// returned to River, which retries the job by its retry policy.
type WorkFunc[T river.JobArgs] func(ctx context.Context, job *river.Job[T]) error

// Options configures a [Worker].
type Options[T river.JobArgs] struct {
	// Consumer decides about each run of a job and holds the idem
	// runtime and policy (consume.Options: Policy, MinDelay, MaxDelay,
	// MissingKey, CallOptions). Required.
	Consumer *consume.Consumer

	// Key returns a job's idempotency key; "" means it has none (see
	// consume.Options.MissingKey: by default the job is cancelled, with a
	// warning logged). Derive it from the args, not from the job's id:
	// a key from the id (strconv.FormatInt(job.ID, 10)) covers the
	// retries and rescues of one job only, not a duplicate job inserted
	// later.
	// Default: the args' IdempotencyKey method, when T implements
	// [Keyed]; a T that does not needs Key.
	Key func(job *river.Job[T]) string

	// Scope is where the keys are unique: workers of two scopes never
	// share a key. Keep it stable across deployments.
	// Default: the kind of T (its Kind method).
	Scope string

	// Fingerprint ties each key to the job's args (a SHA-256 of the args
	// as River stores them): a job whose key was used with other args is
	// cancelled with idem.ErrFingerprintMismatch instead of replaying the
	// other job's result.
	// Default: false.
	Fingerprint bool

	// OnVerdict, if set, is called after each run of a job with the
	// verdict, before Work returns: for metrics and logs. Keep it quick.
	// Default: nil.
	OnVerdict func(job *river.Job[T], v consume.Verdict)

	// Logger receives a warning for each job cancelled.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Worker is a river.Worker[T] that makes a job's work happen once per
// idempotency key; build it with [NewWorker] or [NewTxWorker] and register
// it with river.AddWorker. It embeds river.WorkerDefaults: to set a
// timeout or retry time of your own, embed *Worker[T] in a type of yours
// and define Timeout or NextRetry on it. It holds no goroutines and is
// safe for concurrent use.
type Worker[T river.JobArgs] struct {
	river.WorkerDefaults[T]
	o   Options[T]
	run func(ctx context.Context, job *river.Job[T], d consume.Delivery) consume.Verdict
}

// NewWorker returns a worker that runs work through idem.Do (package
// consume's decision logic) under each job's key. It returns an error
// matching idem.ErrInvalidArgument for a nil work, a nil Consumer or one
// not built by consume.New, or a T that has no key (neither Options.Key
// nor a [Keyed] T).
func NewWorker[T river.JobArgs](opts Options[T], work WorkFunc[T]) (*Worker[T], error) {
	if work == nil {
		return nil, fmt.Errorf("%w: river.NewWorker with a nil work function", idem.ErrInvalidArgument)
	}
	w, err := newWorker(opts)
	if err != nil {
		return nil, err
	}
	c := w.o.Consumer
	w.run = func(ctx context.Context, job *river.Job[T], d consume.Delivery) consume.Verdict {
		_, v := consume.Handle(ctx, c, d, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, work(ctx, job)
		})
		return v
	}
	return w, nil
}

// newWorker checks opts and fills in their defaults.
func newWorker[T river.JobArgs](opts Options[T]) (*Worker[T], error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: river.Options.%s", idem.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if opts.Consumer == nil {
		return nil, bad("Consumer is nil")
	}
	if opts.Consumer.Runtime() == nil {
		return nil, bad("Consumer was not built by consume.New (it has no runtime)")
	}
	var args T
	if opts.Key == nil {
		if _, ok := any(args).(Keyed); !ok {
			return nil, bad("Key is nil and %T has no IdempotencyKey method: a job cannot be keyed", args)
		}
		opts.Key = argsKey[T]
	}
	if opts.Scope == "" {
		opts.Scope = args.Kind()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Worker[T]{o: opts}, nil
}

// argsKey is the key of a job whose args are Keyed.
func argsKey[T river.JobArgs](job *river.Job[T]) string {
	k, _ := any(job.Args).(Keyed)
	if k == nil {
		return ""
	}
	return k.IdempotencyKey()
}

// Work runs job's work once for its key and tells River what to do: nil
// (completed) when the work ran and its result is stored, or a result was
// already stored (a retry, a rescued job, a duplicate job: the work does
// not run again); river.JobCancel for a permanent error (stored, and
// replayed to any later job of the key), a job without a key or one whose
// fingerprint does not match; river.JobSnooze for a key held by a run in
// flight elsewhere (after what its lease has left, without using up an
// attempt); the error otherwise (a transient error, a store that is down,
// the job's context ended), which River retries by its retry policy.
//
// The work runs under a context that keeps ctx's values (the River client
// among them) but not its cancellation, as idem.Do does; it is cancelled
// when the key's lease is lost or the runtime closes. When ctx ends first
// (River's JobTimeout, a client stopping), a NewWorker worker returns a
// retry at once while the work goes on and stores its result for the
// retry to replay; a NewTxWorker worker waits for its work, which holds
// the transaction.
func (w *Worker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	if w == nil || w.run == nil {
		return fmt.Errorf("%w: consume/river: Work on a worker nil or not built by NewWorker or NewTxWorker", idem.ErrInvalidArgument)
	}
	if job == nil || job.JobRow == nil {
		return fmt.Errorf("%w: consume/river: Work with a nil job", idem.ErrInvalidArgument)
	}
	d := consume.Delivery{Scope: w.o.Scope, Key: w.o.Key(job), Attempt: job.Attempt}
	if w.o.Fingerprint {
		sum := sha256.Sum256(job.EncodedArgs)
		d.Fingerprint = sum[:]
	}
	v := w.run(ctx, job, d)
	if w.o.OnVerdict != nil {
		w.o.OnVerdict(job, v)
	}
	return w.answer(job, v)
}

// answer turns a verdict into what Work returns to River.
func (w *Worker[T]) answer(job *river.Job[T], v consume.Verdict) error {
	switch v.Decision {
	case consume.Ack:
		return nil
	case consume.Term:
		err := v.Err
		if err == nil {
			err = errors.New("given up")
		}
		w.o.Logger.Warn("consume/river: job cancelled", "job", job.ID, "kind", job.Kind, "key", v.Key,
			"attempt", job.Attempt, "reason", err.Error())
		return river.JobCancel(fmt.Errorf("consume/river: job %d (idem key %s): %w", job.ID, keytext.Quote(v.Key), err))
	}
	var conflict *idem.ConflictError
	if v.Outcome == idem.NoOutcome && errors.As(v.Err, &conflict) {
		// Not the job's failure: another run has the key. Come back once
		// its lease has had time to end, without using up an attempt.
		return river.JobSnooze(max(v.Delay, 0))
	}
	if v.Err == nil {
		return fmt.Errorf("consume/river: job %d (idem key %s): retry (%s)", job.ID, keytext.Quote(v.Key), v.Decision)
	}
	return fmt.Errorf("consume/river: job %d (idem key %s): %w", job.ID, keytext.Quote(v.Key), v.Err)
}
