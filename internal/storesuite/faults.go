package storesuite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
)

// Pauser is a server that can be paused (SIGSTOP) and resumed; the
// servers of internal/redistest and internal/pgtest are ones.
type Pauser interface {
	Pause()
	Resume()
}

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

// RestartMidRun checks a server restarted (by restart, on a server that
// keeps every write it acknowledged) in the middle of a run on rt: callers
// get ErrStoreUnavailable or their context's error, never a wrong result;
// every key a caller saw completed is still completed afterwards, and is
// not run again; and the runtime works again without a restart of its
// own. A key claimed just before the crash runs again only once its lease
// has ended. With mustNotice, some caller must have seen the outage.
func RestartMidRun(t *testing.T, rt *idem.Runtime, restart func(), mustNotice bool) {
	const n = 400
	runs := make([]atomic.Int32, n)
	ty := newTally()
	stop := make(chan struct{})
	wg := hammer(rt, ty, n, runs, stop)
	time.Sleep(300 * time.Millisecond)
	restart()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	ty.check(t)
	switch {
	case ty.failures() > 0:
	case mustNotice:
		t.Error("no caller noticed that the server was down")
	default:
		t.Log("no caller noticed the restart (it was quick)")
	}
	// Recovery: every key completes now. Keys seen completed before are
	// replayed, not run again: the store had acknowledged them.
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

// Paused checks srv paused past the callers' deadlines during a run on
// rt: they get their context's error or ErrStoreUnavailable, never a wrong
// result, and some caller sees one; after it resumes, the runtime works
// again.
func Paused(t *testing.T, rt *idem.Runtime, srv Pauser) {
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
		t.Error("no caller saw an error while the server was paused")
	}
	v, err := idem.Do(bg, rt, "after-the-pause", func(context.Context) (string, error) { return "fine", nil })
	if err != nil || v != "fine" {
		t.Fatalf("after resume: %q %v", v, err)
	}
}
