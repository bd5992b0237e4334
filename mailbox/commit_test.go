package mailbox_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"
	"weak"

	"github.com/idemrt/idem/mailbox"
)

// recorder is a flush func that keeps every batch it is handed, copied, plus
// the slice itself so the test can hand it back to Done.
type recorder[T any] struct {
	batches [][]T // copies, as they were at flush time
	last    []T   // the slice most recently given to flush
}

func (r *recorder[T]) flush(batch []T) {
	r.batches = append(r.batches, slices.Clone(batch))
	r.last = batch
}

func (r *recorder[T]) count() int { return len(r.batches) }

func TestCommitterFirstAddFlushesAtOnce(t *testing.T) {
	var r recorder[int]
	c := mailbox.NewCommitter(0, r.flush)
	if c.InFlight() || c.Pending() != 0 {
		t.Fatalf("new Committer: InFlight=%v Pending=%d, want false 0", c.InFlight(), c.Pending())
	}
	c.Add(7)
	if r.count() != 1 || !slices.Equal(r.batches[0], []int{7}) {
		t.Fatalf("after first Add, batches = %v, want [[7]]", r.batches)
	}
	if !c.InFlight() {
		t.Fatal("InFlight() = false after the first batch went out")
	}
	if c.Pending() != 0 {
		t.Fatalf("Pending() = %d, want 0", c.Pending())
	}
}

func TestCommitterQueuesWhileInFlight(t *testing.T) {
	var r recorder[int]
	c := mailbox.NewCommitter(0, r.flush)
	c.Add(1)
	for i := 2; i <= 5; i++ {
		c.Add(i)
		if r.count() != 1 {
			t.Fatalf("Add(%d) flushed while a batch was in flight: %v", i, r.batches)
		}
		if got := c.Pending(); got != i-1 {
			t.Fatalf("Pending() = %d after Add(%d), want %d", got, i, i-1)
		}
	}

	c.Done(r.last)
	if r.count() != 2 || !slices.Equal(r.batches[1], []int{2, 3, 4, 5}) {
		t.Fatalf("Done flushed %v, want [2 3 4 5] as the second batch", r.batches)
	}
	if !c.InFlight() || c.Pending() != 0 {
		t.Fatalf("after Done: InFlight=%v Pending=%d, want true 0", c.InFlight(), c.Pending())
	}

	c.Done(r.last)
	if r.count() != 2 {
		t.Fatalf("Done with nothing pending flushed %v", r.batches[2:])
	}
	if c.InFlight() {
		t.Fatal("InFlight() = true after the last batch was done")
	}

	// Idle again: the next Add goes at once, alone.
	c.Add(6)
	if r.count() != 3 || !slices.Equal(r.batches[2], []int{6}) {
		t.Fatalf("Add after idle: batches = %v, want third batch [6]", r.batches)
	}
}

func TestCommitterMaxBatchSplits(t *testing.T) {
	var r recorder[int]
	c := mailbox.NewCommitter(2, r.flush)
	c.Add(1)
	for i := 2; i <= 6; i++ {
		c.Add(i)
	}
	want := [][]int{{1}, {2, 3}, {4, 5}, {6}}
	wantPending := []int{5, 3, 1, 0}
	for i := range want {
		if r.count() != i+1 {
			t.Fatalf("step %d: %d batches so far, want %d", i, r.count(), i+1)
		}
		if !slices.Equal(r.batches[i], want[i]) {
			t.Fatalf("batch %d = %v, want %v", i, r.batches[i], want[i])
		}
		if got := c.Pending(); got != wantPending[i] {
			t.Fatalf("after batch %d, Pending() = %d, want %d", i, got, wantPending[i])
		}
		c.Done(r.last)
	}
	if r.count() != len(want) || c.InFlight() {
		t.Fatalf("after the last Done: %d batches, InFlight=%v", r.count(), c.InFlight())
	}
}

func TestCommitterMaxBatchExactFit(t *testing.T) {
	var r recorder[int]
	c := mailbox.NewCommitter(3, r.flush)
	c.Add(0)
	c.Add(1)
	c.Add(2)
	c.Add(3)
	c.Done(r.last)
	if !slices.Equal(r.batches[1], []int{1, 2, 3}) || c.Pending() != 0 {
		t.Fatalf("second batch = %v, Pending = %d; want [1 2 3], 0", r.batches[1], c.Pending())
	}
}

func TestCommitterZeroMaxIsUnlimited(t *testing.T) {
	var r recorder[int]
	c := mailbox.NewCommitter(0, r.flush)
	c.Add(-1)
	const n = 10_000
	for i := range n {
		c.Add(i)
	}
	c.Done(r.last)
	if r.count() != 2 || len(r.batches[1]) != n {
		t.Fatalf("with max 0, %d queued ops went out as %d batches (second of len %d), want one", n, r.count()-1, len(r.batches[1]))
	}
}

// TestCommitterDoneClearsBatch checks that Done drops the references a batch
// holds, so a reused batch slice does not keep finished operations alive.
func TestCommitterDoneClearsBatch(t *testing.T) {
	for _, max := range []int{0, 2} {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) {
			var r recorder[*int]
			c := mailbox.NewCommitter(max, r.flush)
			c.Add(new(int))
			c.Add(new(int))
			c.Add(new(int))
			for c.InFlight() {
				b := r.last
				c.Done(b)
				for i, p := range b {
					if p != nil {
						t.Fatalf("batch[%d] still set after Done", i)
					}
				}
			}
		})
	}
}

// TestCommitterReusesBatchMemory checks that the slice handed to Done is the
// memory of a later batch, so a busy Committer stops allocating.
func TestCommitterReusesBatchMemory(t *testing.T) {
	var r recorder[int]
	c := mailbox.NewCommitter(0, r.flush)
	c.Add(1)
	first := unsafe.SliceData(r.last)
	c.Add(2)
	c.Add(3)
	c.Done(r.last) // the first batch's memory is now spare
	c.Add(4)       // queued into the spare memory
	c.Done(r.last)
	if got := unsafe.SliceData(r.last); got != first {
		t.Fatal("third batch does not reuse the first batch's memory")
	}
	if !slices.Equal(r.last, []int{4}) {
		t.Fatalf("third batch = %v, want [4]", r.last)
	}
}

func TestCommitterSteadyStateAllocatesNothing(t *testing.T) {
	var cur []int
	c := mailbox.NewCommitter(0, func(b []int) { cur = b })
	c.Add(0)
	step := func() {
		c.Add(1)
		c.Add(2)
		c.Add(3)
		c.Done(cur)
	}
	for range 4 { // grow both buffers to their working size
		step()
	}
	if allocs := testing.AllocsPerRun(1000, step); allocs != 0 {
		t.Fatalf("a steady Add/Add/Add/Done cycle allocates %v times, want 0", allocs)
	}
}

// A flush that appends to its batch (say, to add a marker) must not write
// into operations that are still queued.
func TestCommitterFlushAppendDoesNotCorruptQueue(t *testing.T) {
	for _, max := range []int{0, 2, 3} {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) {
			var got []int
			var cur []int
			c := mailbox.NewCommitter(max, func(b []int) {
				got = append(got, b...)
				cur = b
				b = append(b, -1, -1, -1, -1)
				_ = b
			})
			next := 0
			for round := range 20 {
				for range round % 5 {
					c.Add(next)
					next++
				}
				if c.InFlight() {
					c.Done(cur)
				}
			}
			for c.InFlight() {
				c.Done(cur)
			}
			for i, v := range got {
				if v != i {
					t.Fatalf("op %d flushed as %d (all: %v)", i, v, got)
				}
			}
			if len(got) != next {
				t.Fatalf("flushed %d ops, want %d", len(got), next)
			}
		})
	}
}

// TestCommitterMatchesModel drives the Committer with random Adds and Dones
// and checks every flush against a plain queue model.
func TestCommitterMatchesModel(t *testing.T) {
	iters := 2000
	if testing.Short() {
		iters = 200
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		max := rng.IntN(5) // 0 means no limit
		t.Run(fmt.Sprintf("seed=%d/max=%d", seed, max), func(t *testing.T) {
			var (
				queue    []int // model: ops waiting
				inflight bool  // model: a batch is out
				got      []int // what flush received
				cur      []int
				flushes  int
				next     int
			)
			take := func() []int {
				n := len(queue)
				if max > 0 && n > max {
					n = max
				}
				b := slices.Clone(queue[:n])
				queue = queue[n:]
				return b
			}
			var want []int
			c := mailbox.NewCommitter(max, func(b []int) {
				flushes++
				got = slices.Clone(b)
				cur = b
			})
			for range iters {
				before := flushes
				if rng.IntN(3) > 0 || !inflight {
					c.Add(next)
					queue = append(queue, next)
					next++
					if !inflight {
						want, inflight = take(), true
					} else {
						want = nil
					}
				} else {
					c.Done(cur)
					if len(queue) > 0 {
						want = take()
					} else {
						want, inflight = nil, false
					}
				}
				if want == nil {
					if flushes != before {
						t.Fatalf("unexpected flush of %v", got)
					}
				} else if flushes != before+1 || !slices.Equal(got, want) {
					t.Fatalf("flushed %v (%d times), want %v once", got, flushes-before, want)
				}
				if c.InFlight() != inflight || c.Pending() != len(queue) {
					t.Fatalf("InFlight=%v Pending=%d, model %v %d", c.InFlight(), c.Pending(), inflight, len(queue))
				}
			}
		})
	}
}

func TestCommitterStructOps(t *testing.T) {
	type op struct {
		key string
		val []byte
	}
	var r recorder[op]
	c := mailbox.NewCommitter(0, r.flush)
	c.Add(op{"a", []byte("1")})
	c.Add(op{"b", []byte("2")})
	c.Done(r.last)
	if len(r.batches) != 2 || r.batches[1][0].key != "b" || string(r.batches[1][0].val) != "2" {
		t.Fatalf("batches = %v", r.batches)
	}
}

// TestCommitterReleasesFinishedOps checks that once every operation has been
// flushed and done, the idle Committer keeps none of them reachable (Done
// clears the batch for exactly this reason).
func TestCommitterReleasesFinishedOps(t *testing.T) {
	for _, max := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("max=%d", max), func(t *testing.T) {
			var cur []*[64]byte
			c := mailbox.NewCommitter(max, func(b []*[64]byte) { cur = b })
			var weaks []weak.Pointer[[64]byte]
			add := func() {
				p := new([64]byte)
				weaks = append(weaks, weak.Make(p))
				c.Add(p)
			}
			for range 4 {
				add()
			}
			for c.InFlight() {
				c.Done(cur)
			}
			cur = nil
			runtime.GC()
			runtime.GC()
			var alive []int
			for i, w := range weaks {
				if w.Value() != nil {
					alive = append(alive, i)
				}
			}
			runtime.KeepAlive(c)
			if len(alive) > 0 {
				t.Fatalf("ops %v are still reachable through the idle Committer", alive)
			}
		})
	}
}
