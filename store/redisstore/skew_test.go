package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// A completed record whose PTTL is a little above the TTL it was stored
// with, which a server whose clock is behind the writer's shows for
// records completed less than the skew ago (a failover to a replica, an
// NTP step back), reads as stored at the time of reading. It used to be
// corrupt. An excess beyond the tolerated skew stays corrupt
// (TestHandSetTimesAreCorrupt).
func TestCompletedRecordUnderClockSkew(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	for _, excess := range []time.Duration{500 * time.Millisecond, 29 * time.Second} {
		key := fmt.Sprint("k-", excess)
		a, err := s.Claim(bg, key, claimReq("A"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(bg, key, a.Token, store.Record{Value: []byte(`"v"`)}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := c.PExpire(bg, s.RecordKey(key), time.Hour+excess).Err(); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		rec, gerr := s.Get(bg, key)
		r, cerr := s.Claim(bg, key, claimReq("B"))
		e, ierr := s.Inspect(bg, key)
		after := time.Now()
		if gerr != nil || cerr != nil || ierr != nil || r.Status != store.Completed || e.State != store.Done {
			t.Fatalf("PTTL %v over the TTL: Get %v; Claim %v %v; Inspect %v %v", excess, gerr, r.Status, cerr, e.State, ierr)
		}
		for what, got := range map[string]store.Record{"Get": rec, "Claim": r.Record, "Inspect": e.Record} {
			if got.CreatedAt.Before(before) || got.CreatedAt.After(after) || got.ExpiresAt.Sub(got.CreatedAt) != time.Hour ||
				string(got.Value) != `"v"` || got.Token != a.Token {
				t.Errorf("PTTL %v over the TTL: %s = %+v; want created now (%v..%v), expiring an hour later", excess, what, got, before, after)
			}
		}
	}
}
