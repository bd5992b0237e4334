package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// A record exactly at the server's proto-max-bulk-len is sent and stored
// (Redis refuses only a longer bulk string); one byte more is refused
// unsent, and the connection keeps serving.
func TestRecordAtTheLimit(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{Args: []string{"--proto-max-bulk-len", "1mb"}})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 1})
	t.Cleanup(func() { c.Close() })
	s, err := New(ctx, c, Options{KeyPrefix: "edge:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, over := range []int{0, 1} {
		key := "at"
		if over > 0 {
			key = "over"
		}
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour})
		if err != nil || res.Status != store.Claimed {
			t.Fatalf("claim: %+v %v", res, err)
		}
		head := len(completedValue(res.Token, store.Record{}, time.Hour))
		rec := store.Record{Value: make([]byte, 1<<20-head+over)}
		if n := len(completedValue(res.Token, rec, time.Hour)); n != 1<<20+over {
			t.Fatalf("value of %d bytes, want %d", n, 1<<20+over)
		}
		_, err = s.Complete(ctx, key, res.Token, rec, time.Hour)
		switch {
		case over == 0 && err != nil:
			t.Fatalf("a record of exactly proto-max-bulk-len: %v", err)
		case over > 0 && !errors.Is(err, store.ErrTooLarge):
			t.Fatalf("a record one byte over: %v, want ErrTooLarge", err)
		}
		if _, err := s.Get(ctx, "at"); err != nil {
			t.Fatalf("get after: %v", err)
		}
	}
}
