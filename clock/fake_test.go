package clock_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
)

var epoch = time.Date(2026, time.January, 2, 3, 4, 5, 6, time.UTC)

var _ clock.Clock = (*clock.Fake)(nil)

func TestFakeNowStartsAtStartAndStaysPut(t *testing.T) {
	c := clock.NewFake(epoch)
	for range 3 {
		if got := c.Now(); !got.Equal(epoch) {
			t.Fatalf("Now() = %v, want %v", got, epoch)
		}
	}
	if c.Timers() != 0 {
		t.Fatalf("new Fake has %d timers", c.Timers())
	}
}

func TestFakeAdvanceAndSet(t *testing.T) {
	c := clock.NewFake(epoch)
	c.Advance(time.Second)
	c.Advance(2 * time.Minute)
	if got, want := c.Now(), epoch.Add(time.Second+2*time.Minute); !got.Equal(want) {
		t.Fatalf("after Advance: Now() = %v, want %v", got, want)
	}
	target := epoch.Add(time.Hour)
	c.Set(target)
	if got := c.Now(); !got.Equal(target) {
		t.Fatalf("after Set: Now() = %v, want %v", got, target)
	}
	c.Advance(0)
	if got := c.Now(); !got.Equal(target) {
		t.Fatalf("Advance(0) moved the time to %v", got)
	}
}

func TestFakeNeverMovesBackwards(t *testing.T) {
	c := clock.NewFake(epoch)
	c.Advance(time.Hour)
	now := epoch.Add(time.Hour)

	c.Set(epoch)
	if got := c.Now(); !got.Equal(now) {
		t.Fatalf("Set to an earlier time moved Now() to %v, want %v", got, now)
	}
	c.Advance(-time.Minute)
	if got := c.Now(); !got.Equal(now) {
		t.Fatalf("Advance(-1m) moved Now() to %v, want %v", got, now)
	}
	c.Set(now)
	if got := c.Now(); !got.Equal(now) {
		t.Fatalf("Set(Now()) moved Now() to %v", got)
	}
}

func TestFakeAfterFuncWaitsForAdvance(t *testing.T) {
	c := clock.NewFake(epoch)
	var ran []string
	c.AfterFunc(0, func() { ran = append(ran, "zero") })
	c.AfterFunc(-time.Second, func() { ran = append(ran, "negative") })
	c.AfterFunc(time.Second, func() { ran = append(ran, "one second") })
	if len(ran) != 0 {
		t.Fatalf("AfterFunc ran %v before any Advance", ran)
	}
	if got := c.Timers(); got != 3 {
		t.Fatalf("Timers() = %d, want 3", got)
	}

	c.Advance(0)
	if want := []string{"negative", "zero"}; !slices.Equal(ran, want) {
		t.Fatalf("Advance(0) ran %v, want %v", ran, want)
	}
	if got := c.Timers(); got != 1 {
		t.Fatalf("Timers() = %d after Advance(0), want 1", got)
	}
	// The past deadline must not have dragged the clock back.
	if got := c.Now(); !got.Equal(epoch) {
		t.Fatalf("Now() = %v after firing a past timer, want %v", got, epoch)
	}

	c.Advance(time.Second - 1)
	if len(ran) != 2 {
		t.Fatalf("a timer ran 1ns early: %v", ran)
	}
	c.Advance(1)
	if len(ran) != 3 || ran[2] != "one second" {
		t.Fatalf("a timer did not run exactly at its deadline: %v", ran)
	}
}

// Advance runs due callbacks in deadline order (registration order for equal
// deadlines), each seeing Now() equal to its own deadline, and leaves the
// clock at the target.
func TestFakeAdvanceRunsInDeadlineOrder(t *testing.T) {
	c := clock.NewFake(epoch)
	type fired struct {
		name string
		at   time.Time
	}
	var got []fired
	add := func(name string, d time.Duration) {
		c.AfterFunc(d, func() { got = append(got, fired{name, c.Now()}) })
	}
	add("c", 3*time.Second)
	add("a", 1*time.Second)
	add("late", time.Hour)
	add("b1", 2*time.Second)
	add("b2", 2*time.Second)
	add("b3", 2*time.Second)
	add("d", 5*time.Second)

	c.Advance(5 * time.Second)

	want := []fired{
		{"a", epoch.Add(1 * time.Second)},
		{"b1", epoch.Add(2 * time.Second)},
		{"b2", epoch.Add(2 * time.Second)},
		{"b3", epoch.Add(2 * time.Second)},
		{"c", epoch.Add(3 * time.Second)},
		{"d", epoch.Add(5 * time.Second)},
	}
	if len(got) != len(want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	for i := range want {
		if got[i].name != want[i].name || !got[i].at.Equal(want[i].at) {
			t.Fatalf("call %d: %s at %v, want %s at %v", i, got[i].name, got[i].at, want[i].name, want[i].at)
		}
	}
	if n := c.Timers(); n != 1 {
		t.Fatalf("Timers() = %d, want 1 (the one due in an hour)", n)
	}
	if now, want := c.Now(), epoch.Add(5*time.Second); !now.Equal(want) {
		t.Fatalf("Now() = %v after Advance, want %v", now, want)
	}
}

// TestFakeRandomOrder registers timers with random deadlines and checks, for
// each seed, that Set fires exactly the due ones, sorted.
func TestFakeRandomOrder(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := clock.NewFake(epoch)
		type rec struct {
			at  time.Duration
			seq int
		}
		var want, got []rec
		for i := range 200 {
			d := time.Duration(rng.IntN(100)) * time.Millisecond
			r := rec{d, i}
			want = append(want, r)
			c.AfterFunc(d, func() {
				if now := c.Now().Sub(epoch); now != r.at {
					t.Errorf("timer %d due at %v ran with Now() at %v", r.seq, r.at, now)
				}
				got = append(got, r)
			})
		}
		cut := 50 * time.Millisecond
		c.Set(epoch.Add(cut))
		want = slices.DeleteFunc(want, func(r rec) bool { return r.at > cut })
		slices.SortStableFunc(want, func(a, b rec) int { return int(a.at - b.at) })
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: fired %v, want %v", seed, got, want)
		}
		if c.Timers() != 200-len(want) {
			t.Fatalf("seed %d: Timers() = %d, want %d", seed, c.Timers(), 200-len(want))
		}
	}
}

func TestFakeStop(t *testing.T) {
	c := clock.NewFake(epoch)
	var ran atomic.Int32
	tm := c.AfterFunc(time.Second, func() { ran.Add(1) })
	keep := c.AfterFunc(time.Second, func() {})
	if c.Timers() != 2 {
		t.Fatalf("Timers() = %d, want 2", c.Timers())
	}
	if !tm.Stop() {
		t.Fatal("first Stop of a pending timer = false")
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers() = %d after Stop, want 1", c.Timers())
	}
	if tm.Stop() {
		t.Fatal("second Stop = true")
	}
	c.Advance(time.Hour)
	if ran.Load() != 0 {
		t.Fatal("a stopped timer ran")
	}
	if tm.Stop() {
		t.Fatal("Stop after Advance = true")
	}
	if keep.Stop() {
		t.Fatal("Stop of a timer that already ran = true")
	}
	if c.Timers() != 0 {
		t.Fatalf("Timers() = %d, want 0", c.Timers())
	}
}

func TestFakeStopFromInsideCallback(t *testing.T) {
	c := clock.NewFake(epoch)
	var ran []string
	var second, self clock.Timer
	self = c.AfterFunc(time.Second, func() {
		ran = append(ran, "first")
		if !second.Stop() {
			t.Error("Stop of a timer due in the same Advance = false")
		}
		if self.Stop() {
			t.Error("a running timer's own Stop = true")
		}
	})
	second = c.AfterFunc(2*time.Second, func() { ran = append(ran, "second") })
	c.AfterFunc(3*time.Second, func() { ran = append(ran, "third") })
	c.Advance(5 * time.Second)
	if want := []string{"first", "third"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
}

// A callback that arms a new timer due before the Advance's target has it
// run in the same Advance, at its own deadline; a timer past the target
// waits.
func TestFakeCallbackSchedulesWithinSameAdvance(t *testing.T) {
	c := clock.NewFake(epoch)
	var log []string
	note := func(name string) {
		log = append(log, fmt.Sprintf("%s@%v", name, c.Now().Sub(epoch)))
	}
	c.AfterFunc(time.Second, func() {
		note("outer")
		c.AfterFunc(time.Second, func() { // due at 2s
			note("inner")
			c.AfterFunc(0, func() { note("zero") }) // due at 2s, now
		})
		c.AfterFunc(10*time.Second, func() { note("beyond") }) // due at 11s
	})
	c.AfterFunc(3*time.Second, func() { note("fixed") })

	c.Advance(5 * time.Second)
	want := []string{"outer@1s", "inner@2s", "zero@2s", "fixed@3s"}
	if !slices.Equal(log, want) {
		t.Fatalf("ran %v, want %v", log, want)
	}
	if c.Timers() != 1 {
		t.Fatalf("Timers() = %d, want 1 (beyond)", c.Timers())
	}
	c.Advance(6 * time.Second)
	if got := log[len(log)-1]; got != "beyond@11s" {
		t.Fatalf("last call %q, want beyond@11s", got)
	}
}

// Callbacks run outside the clock's lock: one may call every method of the
// Fake, including Advance, without deadlocking.
func TestFakeCallbackMayUseClock(t *testing.T) {
	c := clock.NewFake(epoch)
	var innerAt time.Time
	c.AfterFunc(time.Second, func() {
		_ = c.Now()
		_ = c.Timers()
		tm := c.AfterFunc(time.Hour, func() {})
		tm.Stop()
		c.AfterFunc(time.Second, func() { innerAt = c.Now() })
		c.Advance(time.Second) // runs the inner timer, here
	})
	returnsWithin(t, "Advance whose callback uses the clock", func() {
		c.Advance(time.Second)
	})
	if want := epoch.Add(2 * time.Second); !innerAt.Equal(want) {
		t.Fatalf("inner timer ran at %v, want %v", innerAt, want)
	}
}

// TestFakeConcurrentUse arms and stops timers from many goroutines while
// another advances the clock. Every timer must end up either run once or
// stopped (Stop reported true), never both, never neither. Run with -race.
func TestFakeConcurrentUse(t *testing.T) {
	c := clock.NewFake(epoch)
	const workers, each = 8, 200
	var (
		runs    [workers * each]atomic.Int32
		stopped [workers * each]atomic.Bool
		wg      sync.WaitGroup
		quit    = make(chan struct{})
	)
	var advancer sync.WaitGroup
	advancer.Go(func() {
		for {
			select {
			case <-quit:
				return
			default:
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range each {
				id := w*each + i
				tm := c.AfterFunc(time.Duration(rng.IntN(5))*time.Millisecond, func() { runs[id].Add(1) })
				if rng.IntN(2) == 0 && tm.Stop() {
					stopped[id].Store(true)
				}
			}
		})
	}
	wg.Wait()
	close(quit)
	advancer.Wait()
	c.Advance(time.Hour) // fire whatever is left

	for id := range runs {
		n, s := runs[id].Load(), stopped[id].Load()
		switch {
		case n > 1:
			t.Fatalf("timer %d ran %d times", id, n)
		case n == 1 && s:
			t.Fatalf("timer %d ran although Stop reported true", id)
		case n == 0 && !s:
			t.Fatalf("timer %d neither ran nor was stopped", id)
		}
	}
	if c.Timers() != 0 {
		t.Fatalf("Timers() = %d after the final Advance, want 0", c.Timers())
	}
}

// TestFakeConcurrentAdvanceAddsUp: Fake is documented as safe for
// concurrent use, and Advance as moving the time forward by d, so two
// Advance calls that have both returned must have moved it by the sum.
func TestFakeConcurrentAdvanceAddsUp(t *testing.T) {
	c := clock.NewFake(epoch)
	c.AfterFunc(time.Second, func() {
		// Another goroutine advances while this Advance is in progress.
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Advance(time.Second)
		}()
		select {
		case <-done:
		case <-time.After(waitLimit):
			t.Error("a concurrent Advance did not return")
		}
	})
	c.Advance(10 * time.Second)
	if got, want := c.Now(), epoch.Add(11*time.Second); !got.Equal(want) {
		t.Fatalf("Advance(10s) and a concurrent Advance(1s) left Now() at +%v, want +%v",
			got.Sub(epoch), want.Sub(epoch))
	}
}
