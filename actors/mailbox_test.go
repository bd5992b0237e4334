package actors

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestMsgQueueIsFIFOAndReusesMemory(t *testing.T) {
	var q msgQueue
	next, want := 0, 0
	for round := range 50 {
		for range 100 + round {
			q.push(next)
			next++
		}
		for range 90 { // never drains: the front is moved down on push
			if got := q.pop(); got != want {
				t.Fatalf("pop = %v, want %d", got, want)
			}
			want++
		}
	}
	if cap(q.buf) > 4096 {
		t.Fatalf("queue of %d messages holds %d slots", len(q.buf)-q.head, cap(q.buf))
	}
	for q.pop() != nil {
	}
	if q.head != 0 || len(q.buf) != 0 {
		t.Fatal("a drained queue does not start over")
	}
}

func TestDrainedQueueDropsABurstsMemory(t *testing.T) {
	var q msgQueue
	for i := range 20000 {
		q.push(i)
	}
	for q.pop() != nil {
	}
	if cap(q.buf) > maxIdleQueue {
		t.Fatalf("a drained queue keeps %d slots, want at most %d", cap(q.buf), maxIdleQueue)
	}
	q.push("next")
	if got := q.pop(); got != "next" {
		t.Fatalf("pop after a drop = %v, want next", got)
	}
}

// countingInvoker counts the user messages it handles.
type countingInvoker struct{ n atomic.Int64 }

func (i *countingInvoker) InvokeSystemMessage(any)  {}
func (i *countingInvoker) InvokeUserMessage(any)    { i.n.Add(1) }
func (i *countingInvoker) EscalateFailure(any, any) {}

// goDispatcher runs each scheduled run on a goroutine of its own.
type goDispatcher struct{}

func (goDispatcher) Schedule(fn func()) { go fn() }
func (goDispatcher) Throughput() int    { return 300 }

// A poster that has pushed its message but not yet counted it leaves the
// count at -1 once the worker has handled the message: the worker must go
// idle then, not spin until the poster counts.
func TestMailboxGoesIdleWhileAPosterIsBetweenPushAndCount(t *testing.T) {
	inv := &countingInvoker{}
	m := newShardMailbox().(*shardMailbox)
	m.RegisterHandlers(inv, goDispatcher{})
	m.user.push("msg") // the poster pushes, then pauses before counting
	m.running.Store(true)
	done := make(chan struct{})
	go func() { m.process(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the worker still runs with its queue drained (count %d)", m.userN.Load())
	}
	if inv.n.Load() != 1 {
		t.Fatalf("handled %d messages, want 1", inv.n.Load())
	}
	m.userN.Add(1) // the poster resumes: its schedule runs an empty pass
	m.schedule()
	for deadline := time.Now().Add(5 * time.Second); m.running.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the mailbox does not go idle after the poster's schedule")
		}
	}
}
