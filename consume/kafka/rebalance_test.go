package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// A second member joins while the first runs a handler in each of two
// partitions: the partition revoked from the first member commits nothing
// from it (its handler goes on under idem), the second member waits for
// that run and replays it, and every record has one effect.
func TestRebalanceMidHandler(t *testing.T) {
	e := newEnv(t, 2)
	st := memstore.New(memstore.Options{})
	member := func() *consume.Consumer { // a runtime of its own on the shared store
		rt := idemtest.Runtime(t, idem.Options{Store: st, Policy: idem.Policy{Lease: 5 * time.Second}})
		c, err := consume.New(consume.Options{Runtime: rt, Policy: idem.Policy{Settle: 10 * time.Second},
			MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cs := e.watchCommits(nil)
	f := newEffects()
	gate := make(chan struct{})
	inside := make(chan string, 2)
	handler := func(ctx context.Context, r *kafka.Record) error {
		f.add(r.Key)
		if r.Key == "x0" || r.Key == "x1" {
			inside <- r.Key
			<-gate
		}
		return nil
	}
	var (
		mu       sync.Mutex
		canceled []int32 // partitions whose handling ended on a revocation, at the first member
		joinedAt []string
	)
	a := e.start(t, kafka.Options{Consumer: member(), Handler: handler,
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			if v.Decision == consume.Retry && errors.Is(v.Err, context.Canceled) {
				mu.Lock()
				canceled = append(canceled, r.Partition)
				mu.Unlock()
			}
		}})
	e.produce(t, 0, "x0", 1)
	e.produce(t, 0, "y0", 1)
	e.produce(t, 1, "x1", 1)
	e.produce(t, 1, "y1", 1)
	idemtest.Recv(t, inside)
	idemtest.Recv(t, inside)
	memberA, _ := a.Client().GroupMetadata()

	e.start(t, kafka.Options{Consumer: member(), Handler: handler,
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			mu.Lock()
			joinedAt = append(joinedAt, fmt.Sprintf("%s/%v/%v", r.Key, v.Decision, v.Outcome))
			mu.Unlock()
		}})
	var revoked int32
	idemtest.Eventually(t, "a partition revoked from the first member", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(canceled) > 0 {
			revoked = canceled[0]
		}
		return len(canceled) > 0
	})
	// The second member fetches the revoked partition's first record
	// again, and waits for the run in flight (or replays it, if that run
	// ends first): end that run once the partition is the second
	// member's.
	idemtest.Eventually(t, "the revoked partition assigned to the second member", func() bool {
		return e.assignedTo(t, revoked) != "" && e.assignedTo(t, revoked) != memberA
	})
	close(gate)
	e.allCommitted(t, 2)
	for _, k := range []string{"x0", "y0", "x1", "y1"} {
		if n := f.get(k); n != 1 {
			t.Errorf("%s: %d effects, want 1", k, n)
		}
	}
	if !slices.ContainsFunc(cs.all(), func(c commit) bool { return c.member == memberA }) {
		t.Error("no OffsetCommit of the topic from the first member seen: nothing was checked")
	}
	for _, c := range cs.all() {
		if c.member == memberA && c.partition == revoked {
			t.Errorf("the first member committed %d on partition %d, revoked from it", c.offset, revoked)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("revoked partition %d; the second member's verdicts: %v", revoked, joinedAt)
}
