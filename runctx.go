package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// nestedKey marks the context of a function the runtime runs.
type nestedKey struct{}

// detached is what context.WithoutCancel(context.WithValue(parent,
// nestedKey{}, rt)) returns, as one value: parent's values and the mark of
// a nested call, without parent's deadline or cancellation.
type detached struct {
	parent context.Context
	rt     *Runtime
}

func (*detached) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*detached) Done() <-chan struct{}       { return nil }
func (*detached) Err() error                  { return nil }
func (*detached) String() string              { return "idem.detached" }

func (d *detached) Value(key any) any {
	if _, ok := key.(nestedKey); ok {
		return d.rt
	}
	return d.parent.Value(key)
}

// runCtx is the context fn runs under: the caller's values and deadline,
// without the caller's cancellation, cancelled by the shard (lease lost,
// runtime closing) with a cause that context.Cause reports.
//
// That cancellation is a context.WithCancelCause (and a WithDeadline when
// the caller has a deadline): two allocations or more, for functions that
// mostly never look at their context. So it is made the first time fn
// asks for it: Done, Err once it may be set, or Value of any key but the
// nested-call mark (context.Cause and every context derived from this one
// ask that way). A cancel that came before is applied to it then.
type runCtx struct {
	base detached
	// claim and key describe the run's claim (ClaimFrom); claim lives in
	// the owner.
	claim *claim
	key   string

	ready atomic.Bool // inner is set; read it without the lock
	mu    sync.Mutex
	inner context.Context
	stop  context.CancelCauseFunc // inner's
	// Before inner exists: whether the run was cancelled, and why.
	stopped bool
	cause   error
}

func (c *runCtx) init(parent context.Context, rt *Runtime) {
	c.base = detached{parent: parent, rt: rt}
}

// ctx returns the cancellation context, made on first use.
func (c *runCtx) ctx() context.Context {
	if c.ready.Load() {
		return c.inner
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner == nil {
		c.inner, c.stop = runContext(c.base.parent, &c.base)
		if c.stopped {
			c.stop(c.cause)
		}
		c.ready.Store(true)
	}
	return c.inner
}

// CancelRun cancels the run with cause (actors.Canceler; also the owner's
// own cancel, with a nil cause, once fn has returned).
func (c *runCtx) CancelRun(cause error) {
	if c.ready.Load() {
		c.stop(cause)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inner != nil {
		c.stop(cause)
		return
	}
	if !c.stopped {
		c.stopped, c.cause = true, cause
	}
}

func (c *runCtx) Deadline() (time.Time, bool) { return c.base.parent.Deadline() }
func (c *runCtx) Done() <-chan struct{}       { return c.ctx().Done() }
func (c *runCtx) String() string              { return "idem.runContext" }

func (c *runCtx) Err() error {
	if !c.ready.Load() {
		c.mu.Lock()
		quiet := !c.stopped && c.inner == nil
		c.mu.Unlock()
		if quiet && !c.pastDeadline() {
			return nil
		}
	}
	return c.ctx().Err()
}

func (c *runCtx) pastDeadline() bool {
	d, ok := c.base.parent.Deadline()
	return ok && !time.Now().Before(d)
}

func (c *runCtx) Value(key any) any {
	switch key.(type) {
	case nestedKey:
		return c.base.rt
	case claimKey:
		if c.claim != nil {
			return Claim{Key: c.key, Fence: c.claim.token.Fence, Attempt: c.claim.attempt, Takeover: c.claim.takeover}
		}
	}
	return c.ctx().Value(key)
}

// runContext returns the cancellation context of a run: base (ctx's
// values, without its cancellation) with ctx's deadline, cancellable by
// the shard.
func runContext(ctx context.Context, base *detached) (context.Context, context.CancelCauseFunc) {
	run, cancel := context.WithCancelCause(base)
	deadline, ok := ctx.Deadline()
	if !ok {
		return run, cancel
	}
	withDeadline, cancelDeadline := context.WithDeadline(run, deadline)
	return withDeadline, func(cause error) {
		cancel(cause)
		cancelDeadline()
	}
}
