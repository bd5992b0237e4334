package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// wantCorrupt fails the test unless err is a *CorruptError of key whose
// reason holds reason, matching store.ErrCorrupt and no contract error.
func wantCorrupt(t *testing.T, what string, err error, key, reason string) {
	t.Helper()
	var ce *redisstore.CorruptError
	switch {
	case !errors.As(err, &ce) || ce.Key != key:
		t.Errorf("%s: %v (%T), want a *CorruptError of key %q", what, err, err, key)
	case !errors.Is(err, store.ErrCorrupt) || store.IsContract(err):
		t.Errorf("%s: %v matches store.ErrCorrupt %v, a contract error %v; want ErrCorrupt only",
			what, err, errors.Is(err, store.ErrCorrupt), store.IsContract(err))
	case !strings.Contains(ce.Reason, reason):
		t.Errorf("%s: reason %q, want it to say %q", what, ce.Reason, reason)
	}
}

// Another application's key at a record's name (a string, a list, a hash
// that is no record) is a *CorruptError matching store.ErrCorrupt for every
// operation, never a Redis WRONGTYPE error that reads as an outage, never a
// success; and no operation changes it. Runtime.Clear meets such keys when
// it clears every key of the store, and counts them instead of stopping.
func TestForeignKeyIsCorrupt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	foreign := map[string]struct {
		write  func(rk string) error
		typ    string
		reason string
	}{
		"string":   {func(rk string) error { return c.Set(bg, rk, "other app", time.Hour).Err() }, "string", "not a v3 record"},
		"string-3": {func(rk string) error { return c.Set(bg, rk, "3 little pigs", time.Hour).Err() }, "string", "garbled v3 header"},
		"list":     {func(rk string) error { return c.RPush(bg, rk, "other app").Err() }, "list", "not a string: list"},
		"zset":     {func(rk string) error { return c.ZAdd(bg, rk, redis.Z{Member: "m"}).Err() }, "zset", "not a string: zset"},
		"hash":     {func(rk string) error { return c.HSet(bg, rk, "name", "other app").Err() }, "hash", "not a string: hash"},
		"hash-v2":  {func(rk string) error { return c.HSet(bg, rk, "st", "p", "own", "a", "fen", "1", "lu", "1").Err() }, "hash", "not a string: hash"},
	}
	tok := store.Token{Fence: 1, Owner: "a"}
	for key, f := range foreign {
		rk := s.RecordKey(key)
		if err := f.write(rk); err != nil {
			t.Fatal(err)
		}
		dump := c.Dump(bg, rk).Val()
		ops := []*store.Op{
			{Kind: store.OpClaim, Key: key, Claim: claimReq("a")},
			{Kind: store.OpComplete, Key: key, Token: tok, Record: store.Record{Value: []byte("v")}, TTL: time.Hour},
			{Kind: store.OpRelease, Key: key, Token: tok},
			{Kind: store.OpRenew, Key: key, Token: tok, Lease: time.Minute},
			{Kind: store.OpGet, Key: key},
			{Kind: store.OpForget, Key: key},
		}
		s.Batch(bg, ops)
		for _, op := range ops {
			wantCorrupt(t, key+": "+op.Kind.String(), op.Err, key, f.reason)
		}
		wantCorrupt(t, key+": Forget", s.Forget(bg, key), key, f.reason)
		_, err := s.Inspect(bg, key)
		wantCorrupt(t, key+": Inspect", err, key, f.reason)
		if typ := c.Type(bg, rk).Val(); typ != f.typ || c.Dump(bg, rk).Val() != dump {
			t.Errorf("%s: the foreign key changed: now a %s", key, typ)
		}
	}
}

// A foreign key at the name of a record's waiter set makes the claim that
// would register a waiter, and the completion that would wake registered
// waiters, a *CorruptError, before either writes anything. A completion
// that has no waiters to wake (the record's waiter flag is 0) does not
// read the waiter set at all, so a foreign key there does not stop it.
func TestForeignWaiterSetIsCorrupt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	ws := s.RecordKey("k") + ":w"
	waiter := claimReq("b")
	waiter.Waiter = "instance-b"
	for _, registered := range []bool{false, true} {
		c.Del(bg, s.RecordKey("k"), ws)
		res, err := s.Claim(bg, "k", claimReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		if registered {
			if w, err := s.Claim(bg, "k", waiter); err != nil || w.Status != store.InProgress {
				t.Fatalf("claim as a waiter: %v %v", w.Status, err)
			}
		}
		if err := c.Set(bg, ws, "other app", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = s.Claim(bg, "k", waiter)
		wantCorrupt(t, "claim as a waiter", err, "k", "not a set: string")
		_, err = s.Complete(bg, "k", res.Token, store.Record{Value: []byte("v")}, time.Hour)
		if !registered {
			if err != nil {
				t.Errorf("complete with no waiter registered: %v", err)
			}
		} else {
			wantCorrupt(t, "complete", err, "k", "not a set: string")
			if e, err := s.Inspect(bg, "k"); err != nil || e.State != store.Held || e.Token != res.Token {
				t.Errorf("after the refused complete: %+v, %v; want the key still held by %+v", e, err, res.Token)
			}
		}
		if v := c.Get(bg, ws).Val(); v != "other app" {
			t.Errorf("the foreign waiter-set key holds %q", v)
		}
	}
	// Without the foreign key, the same token completes the key.
	c.Del(bg, ws)
	res, err := s.Inspect(bg, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(bg, "k", res.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatal(err)
	}
}
