package clock_test

import (
	"fmt"
	"time"

	"github.com/idemrt/idem/clock"
)

func ExampleNewFake() {
	start := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	c := clock.NewFake(start)

	c.AfterFunc(30*time.Second, func() {
		fmt.Println("lease expired at", c.Now().Format(time.TimeOnly))
	})
	lease := c.AfterFunc(time.Minute, func() { fmt.Println("never printed") })
	fmt.Println("pending timers:", c.Timers())

	c.Advance(45 * time.Second)
	fmt.Println("stopped:", lease.Stop())
	fmt.Println("now:", c.Now().Format(time.TimeOnly))
	// Output:
	// pending timers: 2
	// lease expired at 12:00:30
	// stopped: true
	// now: 12:00:45
}

func ExampleReal() {
	c := clock.Real()
	done := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	fmt.Println("timer fired")
	// Output:
	// timer fired
}
