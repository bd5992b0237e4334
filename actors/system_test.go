package actors

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/idemrt/idem/mailbox"
)

// A shard's worker must plug into protoactor as a dispatcher.
var _ actor.Dispatcher = dispatcher{}

func TestDispatcherThroughputPositive(t *testing.T) {
	// protoactor's mailbox loops "for i < Throughput()" before yielding; zero
	// or less would make every run yield at once.
	if got := (dispatcher{}).Throughput(); got <= 0 {
		t.Fatalf("Throughput() = %d, want > 0", got)
	}
}

// TestDispatcherRunsActorOnWorker runs a real actor with a Worker as its
// dispatcher: every message is received, in order, on the Worker's
// goroutine, so none is while the Worker runs another job.
func TestDispatcherRunsActorOnWorker(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	w := mailbox.NewWorker()
	defer w.Stop()

	const n = 500
	var got []int
	done := make(chan struct{})
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		if v, ok := ctx.Message().(int); ok {
			got = append(got, v)
			if v == n-1 {
				close(done)
			}
		}
	}, actor.WithDispatcher(dispatcher{w}))
	pid := sys.Root.Spawn(props)

	started, release := make(chan struct{}), make(chan struct{})
	w.Submit(func() {
		close(started)
		<-release
	})
	<-started
	for i := range n {
		sys.Root.Send(pid, i)
	}
	if len(got) != 0 {
		t.Fatalf("the actor received %d messages while its worker was busy elsewhere", len(got))
	}
	close(release)
	<-done
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatalf("poison: %v", err)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("message %d was %d; out of order", i, v)
		}
	}
}
