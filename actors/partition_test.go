package actors

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// slowPartitions is a store in two partitions ("slow:" keys and the rest)
// whose slow partition holds every batch until released.
type slowPartitions struct {
	store.Store
	release chan struct{}
	held    chan struct{} // a slow batch is held
}

func (s *slowPartitions) Partition(key string) int {
	if strings.HasPrefix(key, "slow:") {
		return 1
	}
	return 0
}

func (s *slowPartitions) Batch(ctx context.Context, ops []*store.Op) {
	if strings.HasPrefix(ops[0].Key, "slow:") {
		select {
		case s.held <- struct{}{}:
		default:
		}
		<-s.release
	}
	for _, o := range ops {
		store.RunOne(ctx, s.Store, o)
	}
}

// A batch held by one partition of the store does not delay the keys of
// another: each partition has its own batches in flight.
func TestSlowPartitionDelaysOnlyItsKeys(t *testing.T) {
	ctx := context.Background()
	st := &slowPartitions{Store: memstore.New(memstore.Options{}), release: make(chan struct{}), held: make(chan struct{}, 1)}
	set, err := NewSet(ctx, 1, Config{Store: st, Clock: clock.Real(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close(ctx)
	send := func(key string) *Request {
		r := &Request{Key: key, Lease: time.Minute, TTL: time.Hour, Settle: forever, Reply: make(chan Reply, 1)}
		if err := set.Send(r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	slow := send("slow:a")
	<-st.held
	fast := send("fast:b")
	select {
	case rep := <-fast.Reply:
		if rep.Kind != Grant {
			t.Fatalf("fast key: %+v", rep)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a key of the fast partition waited for the slow one")
	}
	select {
	case rep := <-slow.Reply:
		t.Fatalf("the slow key was answered while its batch is held: %+v", rep)
	default:
	}
	close(st.release)
	if rep := <-slow.Reply; rep.Kind != Grant {
		t.Fatalf("slow key: %+v", rep)
	}
	for _, r := range []*Request{fast, slow} {
		r.Finish = Finish{Req: r, Kind: Transient}
		set.Finish(&r.Finish)
		if rep := <-r.Reply; rep.Kind != FailOwner {
			t.Fatalf("finish: %+v", rep)
		}
	}
}
