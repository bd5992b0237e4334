package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// Records written before the store counted attempts (values of layout 3,
// whose claims keep no attempt) are read as they are, and a claim of
// layout 3 counts as attempt 1: a takeover of it is attempt 2, with a
// fence above the old one; its holder still renews, completes and
// releases it; a completed record of layout 3 (completed records are
// still written so) replays, and once forgotten the key starts again at
// attempt 1 with a larger fence. Every claim and renewal writes layout 4.
func TestLayout3RecordsAreRead(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	const hour = int64(time.Hour / time.Millisecond)
	set := func(key, v string, pttl int64) {
		t.Helper()
		if err := c.Set(bg, s.RecordKey(key), v, time.Duration(pttl)*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
	}
	layout := func(key string) byte {
		t.Helper()
		v, err := c.Get(bg, s.RecordKey(key)).Result()
		if err != nil || v == "" {
			t.Fatalf("%s: GET = %q, %v", key, v, err)
		}
		return v[0]
	}
	held := func(fence int, owner string) string {
		return fmt.Sprintf("3p0%d:%d:%s%d:2:fp", fence, len(owner), owner, hour)
	}

	// A holder whose lease ended (PTTL down to ms) is taken over.
	set("ended", held(5, "a"), hour)
	res, err := s.Claim(bg, "ended", claimReq("b"))
	if err != nil || res.Status != store.Claimed || !res.Takeover || res.Attempt != 2 || res.Token.Fence <= 5 {
		t.Fatalf("takeover of a layout 3 claim: %+v, %v; want a takeover, attempt 2, a fence above 5", res, err)
	}
	if l := layout("ended"); l != '4' {
		t.Errorf("the takeover wrote layout %c, want 4", l)
	}

	// A holder under a live lease: its claim again, a renewal, its release.
	old := store.Token{Fence: 6, Owner: "a"}
	for _, key := range []string{"renewed", "completed", "released"} {
		set(key, held(6, "a"), hour+60_000)
		if res, err := s.Claim(bg, key, claimReq("b")); err != nil || res.Status != store.InProgress || res.Token.Fence != 6 {
			t.Fatalf("%s: another owner's claim = %+v, %v; want in progress, fence 6", key, res, err)
		}
		if res, err := s.Claim(bg, key, claimReq("a")); err != nil || res.Status != store.Claimed || res.Token != old || res.Attempt != 1 {
			t.Fatalf("%s: the holder's claim again = %+v, %v; want %+v, attempt 1", key, res, err, old)
		}
	}
	if err := s.Renew(bg, "renewed", old, time.Minute); err != nil {
		t.Fatal(err)
	}
	if l := layout("renewed"); l != '4' {
		t.Errorf("the renewal wrote layout %c, want 4", l)
	}
	if res, err := s.Claim(bg, "renewed", claimReq("a")); err != nil || res.Token != old || res.Attempt != 1 {
		t.Fatalf("the holder's claim after its renewal = %+v, %v", res, err)
	}
	if rec, err := s.Complete(bg, "completed", old, store.Record{Value: []byte("v")}, time.Hour); err != nil || rec.Token != old {
		t.Fatalf("Complete of a layout 3 claim = %+v, %v", rec, err)
	}
	if rec, err := s.Get(bg, "completed"); err != nil || string(rec.Value) != "v" || rec.Token != old {
		t.Fatalf("Get after the completion = %+v, %v", rec, err)
	}
	if err := s.Release(bg, "released", old); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(bg, "released", claimReq("b")); err != nil || res.Status != store.Claimed || res.Takeover ||
		res.Attempt != 1 || res.Token.Fence <= 6 {
		t.Fatalf("claim after the release = %+v, %v; want attempt 1, a fence above 6", res, err)
	}

	// A released record of layout 3: a new record, a larger fence.
	set("was-released", "3r09:1:o0:0:", hour)
	if res, err := s.Claim(bg, "was-released", claimReq("b")); err != nil || res.Status != store.Claimed ||
		res.Takeover || res.Attempt != 1 || res.Token.Fence <= 9 {
		t.Fatalf("claim of a released layout 3 record = %+v, %v", res, err)
	}

	// A completed record of layout 3: replayed, then forgotten.
	set("done", `3c07:1:o3600000:2:fp"v"`, hour-1000)
	if res, err := s.Claim(bg, "done", claimReq("b")); err != nil || res.Status != store.Completed ||
		string(res.Record.Value) != `"v"` || res.Record.Token != (store.Token{Fence: 7, Owner: "o"}) {
		t.Fatalf("claim of a completed layout 3 record = %+v, %v", res, err)
	}
	if err := s.Forget(bg, "done"); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(bg, "done", claimReq("b")); err != nil || res.Status != store.Claimed || res.Attempt != 1 {
		t.Fatalf("claim after the Forget = %+v, %v", res, err)
	}
	if e, err := s.Inspect(bg, "done"); err != nil || e.State != store.Held || e.Token.Owner != "b" {
		t.Fatalf("Inspect of the new claim = %+v, %v", e, err)
	}
}

// A waiter registered on a claim of layout 3 is woken when its holder
// completes it: the finish script's slower path reads the waiter flag of
// a record of either layout.
func TestLayout3ClaimWakesItsWaiters(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	woken := make(chan string, 1)
	id, stop, err := s.Subscribe(bg, func(key string) {
		if key != "" {
			woken <- key
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := c.Set(bg, s.RecordKey("k"), "3p06:1:a3600000:0:", time.Hour+time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	req := claimReq("b")
	req.Waiter = id
	if res, err := s.Claim(bg, "k", req); err != nil || res.Status != store.InProgress {
		t.Fatalf("waiter's claim = %+v, %v", res, err)
	}
	if v := c.Get(bg, s.RecordKey("k")).Val(); !strings.HasPrefix(v, "3p1") {
		t.Fatalf("record after the waiter's claim = %q, want its waiter flag set in place", v)
	}
	if _, err := s.Complete(bg, "k", store.Token{Fence: 6, Owner: "a"}, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-woken:
		if k != "k" {
			t.Fatalf("woken for %q", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	if n := c.Exists(bg, s.RecordKey("k")+":w").Val(); n != 0 {
		t.Fatal("the waiter set outlived the completion")
	}
}
