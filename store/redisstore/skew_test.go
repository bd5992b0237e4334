package redisstore_test

import (
	"errors"
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

// A record in progress whose expiry was removed by hand (PERSIST, a
// restore without TTL) has no lease the store can read: claims (the
// holder's own too), Inspect and Renew answer corrupt and change nothing;
// the holder can still complete it, which writes an expiry again
// (docs/redis.md, What survives which failure).
func TestRecordWithoutExpiry(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	a, err := s.Claim(bg, "k", claimReq("A"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Persist(bg, s.RecordKey("k")).Err(); err != nil {
		t.Fatal(err)
	}
	_, cerr := s.Claim(bg, "k", claimReq("B"))
	_, oerr := s.Claim(bg, "k", claimReq("A"))
	_, ierr := s.Inspect(bg, "k")
	rerr := s.Renew(bg, "k", a.Token, time.Minute)
	for what, err := range map[string]error{"B's claim": cerr, "A's claim": oerr, "Inspect": ierr, "Renew": rerr} {
		if !errors.Is(err, store.ErrCorrupt) {
			t.Errorf("%s of a record without expiry: %v; want corrupt", what, err)
		}
	}
	if _, err := s.Complete(bg, "k", a.Token, store.Record{Value: []byte(`"v"`)}, time.Hour); err != nil {
		t.Fatalf("the holder's Complete: %v", err)
	}
	if pt := c.PTTL(bg, s.RecordKey("k")).Val(); pt <= 0 || pt > time.Hour {
		t.Errorf("PTTL after the holder's Complete: %v; want the TTL", pt)
	}
	if _, err := s.Get(bg, "k"); err != nil {
		t.Errorf("Get after the holder's Complete: %v", err)
	}
}
