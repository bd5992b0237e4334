package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemrt/idem/store"
)

// A claim the store refuses for its size (the caller's fingerprint is over
// what its server takes) is the caller's error, not a failure of the
// store: it is not logged as one ("callers get ErrStoreUnavailable", which
// they do not), and it does not use up the once-a-second store warning, so
// a store failure right after it is still logged.
func TestTooLargeClaimIsNoStoreFailure(t *testing.T) {
	h := newHarness(t)
	r := h.ask("big")
	h.op(store.OpClaim)
	h.fail(fmt.Errorf("a claim of 2 MB: %w", store.ErrTooLarge))
	if rep := h.reply(r); rep.Kind != FailStore || !errors.Is(rep.Err, store.ErrTooLarge) {
		t.Fatalf("reply %s, want FailStore with ErrTooLarge", fmtReply(rep))
	}
	outage := h.ask("other")
	h.op(store.OpClaim)
	h.fail(errors.New("connection refused"))
	h.reply(outage)
	var warned []string
	h.logs.mu.Lock()
	for _, rec := range h.logs.recs {
		if rec.Level == slog.LevelWarn && strings.Contains(rec.Message, "ErrStoreUnavailable") {
			key := ""
			rec.Attrs(func(a slog.Attr) bool {
				if a.Key == "key" {
					key = a.Value.String()
				}
				return true
			})
			warned = append(warned, key)
		}
	}
	h.logs.mu.Unlock()
	if len(warned) != 1 || warned[0] != "other" {
		t.Fatalf("store failures logged for keys %q, want only the outage's (other)", warned)
	}
}
