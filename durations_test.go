package idem_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Every duration of Options and of the call options is refused, with
// ErrInvalidArgument, when negative or over store.MaxDuration (math.MaxInt64
// for "forever" included), and nothing runs.
func TestDurationBounds(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for _, d := range []time.Duration{math.MaxInt64, -time.Second} {
		opts := map[string]idem.Options{
			"Settle":         {Policy: idem.Policy{Settle: d}},
			"Lease":          {Policy: idem.Policy{Lease: d}},
			"TTL":            {Policy: idem.Policy{TTL: d}},
			"StoreTimeout":   {StoreTimeout: d},
			"PollInterval":   {PollInterval: d},
			"Liveness.Every": {Liveness: idem.Liveness{Every: d}},
			"Liveness.TTL":   {Liveness: idem.Liveness{TTL: d}},
			"Liveness.Grace": {Liveness: idem.Liveness{Grace: d}},
		}
		for name, o := range opts {
			if rt, err := idem.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
				if rt != nil {
					_ = rt.Close(bg)
				}
				t.Errorf("Options.%s %v: %v, want ErrInvalidArgument", name, d, err)
			}
		}
		calls := map[string]idem.CallOption{
			"WithTTL":            idem.WithTTL(d),
			"WithLease":          idem.WithLease(d),
			"WithSettle":         idem.WithSettle(d),
			"WithPolicy(Settle)": idem.WithPolicy(idem.Policy{Settle: d}),
			"WithPolicy(Lease)":  idem.WithPolicy(idem.Policy{Lease: d}),
			"WithPolicy(TTL)":    idem.WithPolicy(idem.Policy{TTL: d}),
		}
		for name, opt := range calls {
			if _, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), opt); !errors.Is(err, idem.ErrInvalidArgument) {
				t.Errorf("%s(%v): %v, want ErrInvalidArgument", name, d, err)
			}
		}
	}
}
