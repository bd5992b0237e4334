package idem

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey string

// A run context made lazily behaves as the context.WithCancelCause it
// stands for, whenever the cancel comes: before or after fn first looks.
func TestRunCtxCancelBeforeAndAfterFirstUse(t *testing.T) {
	cause := errors.New("lease lost")
	parent := context.WithValue(context.Background(), ctxKey("k"), "v")
	for _, early := range []bool{true, false} {
		var c runCtx
		c.init(parent, nil)
		if c.Err() != nil || c.ready.Load() {
			t.Fatal("Err of a quiet run context made its machinery or is set")
		}
		if !early {
			_ = c.Done()
		}
		c.CancelRun(cause)
		select {
		case <-c.Done():
		case <-time.After(time.Second):
			t.Fatal("not done after its cancel")
		}
		if !errors.Is(c.Err(), context.Canceled) || context.Cause(&c) != cause {
			t.Fatalf("early %v: err %v, cause %v", early, c.Err(), context.Cause(&c))
		}
		if c.Value(ctxKey("k")) != "v" || c.Value(nestedKey{}) != (*Runtime)(nil) {
			t.Fatal("values lost")
		}
		child, cancel := context.WithCancel(&c)
		if child.Err() == nil || context.Cause(child) != cause {
			t.Fatalf("child of a cancelled run: err %v, cause %v", child.Err(), context.Cause(child))
		}
		cancel()
	}
}

// The caller's deadline bounds the run, its cancellation does not.
func TestRunCtxKeepsDeadlineNotCancellation(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var c runCtx
	c.init(parent, nil)
	if d, ok := c.Deadline(); !ok || d.IsZero() {
		t.Fatal("deadline lost")
	}
	cancel()
	if c.Err() != nil {
		t.Fatal("the caller's cancel reached the run")
	}
	var past runCtx
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	past.init(expired, nil)
	if !errors.Is(past.Err(), context.DeadlineExceeded) {
		t.Fatalf("past deadline: err %v", past.Err())
	}
	c.CancelRun(nil)
	past.CancelRun(nil)
}
