package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/pgstore"
)

// tally counts the answers of many calls and checks each one.
type tally struct {
	mu        sync.Mutex
	ok        map[string]bool // keys some caller saw completed
	errs      map[string]int
	wrong     []string
	unwelcome []error
}

func newTally() *tally { return &tally{ok: map[string]bool{}, errs: map[string]int{}} }

func (ty *tally) add(key, v string, err error) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	switch {
	case err == nil && v == "value-of-"+key:
		ty.ok[key] = true
	case err == nil:
		ty.wrong = append(ty.wrong, key)
	case errors.Is(err, idem.ErrStoreUnavailable):
		ty.errs["store"]++
	case errors.Is(err, context.DeadlineExceeded):
		ty.errs["deadline"]++
	default:
		ty.unwelcome = append(ty.unwelcome, err)
	}
}

func (ty *tally) failures() int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	return ty.errs["store"] + ty.errs["deadline"]
}

func (ty *tally) check(t *testing.T) {
	if len(ty.wrong) > 0 {
		t.Errorf("wrong results for %v", ty.wrong)
	}
	for _, err := range ty.unwelcome {
		t.Errorf("unexpected error: %v", err)
	}
	t.Logf("%d keys completed, errors %v", len(ty.ok), ty.errs)
}

// hammer calls keys k0..k<n-1> from several goroutines until stop closes.
func hammer(rt *idem.Runtime, ty *tally, n int, runs []atomic.Int32, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := g; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := i % n
				key := fmt.Sprint("k", k)
				ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
				v, err := idem.Do(ctx, rt, key, func(context.Context) (string, error) {
					runs[k].Add(1)
					time.Sleep(5 * time.Millisecond)
					return "value-of-" + key, nil
				})
				cancel()
				ty.add(key, v, err)
			}
		})
	}
	return &wg
}

// PostgreSQL is killed, stays down for half a second, and restarts (it
// acknowledges a commit only once it is written) in the middle of a run: callers get ErrStoreUnavailable
// or their context's error, never a wrong result; every key a caller saw
// completed is still completed afterwards, and is not run again; and the
// runtime works again without a restart of its own. A key claimed just
// before the crash runs again only once its lease has ended.
func TestRestartMidRun(t *testing.T) {
	t.Parallel()
	srv := startServer(t, true)
	s := newStore(t, newPool(t, srv.DSN("postgres")), pgstore.Options{})
	rt := newRuntime(t, idem.Options{Store: s, Lease: 2 * time.Second, Settle: 5 * time.Second, StoreTimeout: time.Second})
	const n = 400
	runs := make([]atomic.Int32, n)
	ty := newTally()
	stop := make(chan struct{})
	wg := hammer(rt, ty, n, runs, stop)
	time.Sleep(300 * time.Millisecond)
	srv.Kill()
	time.Sleep(500 * time.Millisecond) // down for longer than the store's repeats
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	ty.check(t)
	if ty.failures() == 0 {
		t.Error("no caller noticed that PostgreSQL was down")
	}
	before := make([]int32, n)
	for k := range runs {
		before[k] = runs[k].Load()
	}
	for k := range n {
		key := fmt.Sprint("k", k)
		var v string
		var err error
		for range 20 { // a key claimed just before the crash waits for its lease
			ctx, cancel := context.WithTimeout(bg, 3*time.Second)
			v, err = idem.Do(ctx, rt, key, func(context.Context) (string, error) {
				runs[k].Add(1)
				return "value-of-" + key, nil
			})
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil || v != "value-of-"+key {
			t.Fatalf("after the restart, %s: %q %v", key, v, err)
		}
		if ty.ok[key] && runs[k].Load() != before[k] {
			t.Errorf("%s was reported completed before the restart, but ran again", key)
		}
	}
}

// PostgreSQL is paused (SIGSTOP) past the callers' deadlines: they get
// their context's error or ErrStoreUnavailable, never a wrong result; after
// it resumes, the runtime works again.
func TestPaused(t *testing.T) {
	t.Parallel()
	srv := startServer(t, false)
	s := newStore(t, newPool(t, srv.DSN("postgres")), pgstore.Options{})
	rt := newRuntime(t, idem.Options{Store: s, StoreTimeout: time.Second})
	const n = 400
	runs := make([]atomic.Int32, n)
	ty := newTally()
	stop := make(chan struct{})
	wg := hammer(rt, ty, n, runs, stop)
	time.Sleep(200 * time.Millisecond)
	srv.Pause()
	time.Sleep(1500 * time.Millisecond)
	paused := ty.failures()
	srv.Resume()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	ty.check(t)
	if paused == 0 {
		t.Error("no caller saw an error while PostgreSQL was paused")
	}
	v, err := idem.Do(bg, rt, "after-the-pause", func(context.Context) (string, error) { return "fine", nil })
	if err != nil || v != "fine" {
		t.Fatalf("after resume: %q %v", v, err)
	}
}
