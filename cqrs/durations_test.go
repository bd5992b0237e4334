package cqrs_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/cqrs"
)

// Every duration of IdempotencyOptions is refused when negative or over
// store.MaxDuration (math.MaxInt64 included).
func TestDurationBounds(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, -time.Second} {
		for name, o := range map[string]cqrs.IdempotencyOptions{
			"LockTTL":      {LockTTL: d},
			"ProcessedTTL": {ProcessedTTL: d},
			"Settle":       {Policy: idem.Policy{Settle: d}},
			"Lease":        {Policy: idem.Policy{Lease: d}},
			"TTL":          {Policy: idem.Policy{TTL: d}},
		} {
			if p, err := cqrs.NewIdempotency(o); !errors.Is(err, idem.ErrInvalidArgument) {
				if p != nil {
					_ = p.Close(bg)
				}
				t.Errorf("%s %v: %v, want ErrInvalidArgument", name, d, err)
			}
		}
	}
}
