package redisstore_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// The fence stops at 2^53, the largest number the scripts (Lua doubles)
// and the format hold exactly: a takeover of a record at the limit is
// refused as corrupt, and the record is left as it was; one below it
// takes the key with fence 2^53.
func TestFenceAtItsLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	const limit = 1 << 53
	for _, state := range []string{"r", "p"} {
		key := "at-limit-" + state
		v := fmt.Sprintf("3%s0%d:1:o3600000:0:", state, uint64(limit)) // ms = PTTL: a lease already over
		if err := c.Set(bg, s.RecordKey(key), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Claim(bg, key, claimReq("B"))
		var ce *redisstore.CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: claim of a record with fence 2^53 = %+v, %v; want a *CorruptError", key, r, err)
		}
		if got, _ := c.Get(bg, s.RecordKey(key)).Result(); got != v {
			t.Errorf("%s: the refused claim changed the record to %q", key, got)
		}
	}
	if err := c.Set(bg, s.RecordKey("below"), fmt.Sprintf("3r0%d:1:o0:0:", uint64(limit-1)), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Claim(bg, "below", claimReq("B"))
	if err != nil || r.Status != store.Claimed || r.Token.Fence != limit {
		t.Errorf("claim of a record with fence 2^53 − 1 = %+v, %v; want fence 2^53", r, err)
	}
}
