package idemprom_test

import (
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/idemprom"
)

// OnCall is exported (the Collector is an idem.Observer anyone can call, or
// fan events out to). An Outcome or Result the fast-path arrays do not cover
// (a newer runtime's, or a forwarded event) is counted under its name, never
// a panic in the caller's goroutine.
func TestOutOfRangeEventDoesNotPanic(t *testing.T) {
	for _, ev := range []idem.CallEvent{
		{Outcome: idem.Executed, Result: idem.Result(12)},
		{Outcome: idem.Outcome(4), Result: idem.ResultOK},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("OnCall(%+v) panicked: %v", ev, p)
				}
			}()
			idemprom.New(idemprom.Options{}).OnCall(ev)
		}()
	}
}
