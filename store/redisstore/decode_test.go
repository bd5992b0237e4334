package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// decodeReply runs decode on op with the reply val (or the command error
// err), as Batch does after a pipeline.
func decodeReply(s *Store, op *store.Op, val any, err error, now time.Time) {
	s.decode(call{op: op, keys: s.keys(op.Key), cmd: redis.NewCmdResult(val, err)}, now)
}

// A reply the op's script never sends (no code, a code of another script,
// a record state other than c or f) is a *CorruptError. It used to be read
// as the nearest outcome: an empty or non-numeric reply to complete,
// release or renew as ErrLeaseLost and to get as ErrNotFound, an unknown code to
// complete, release, renew or forget as success (complete with a zero
// record), and a record in state "x" as a value.
func TestDecodeUnexpectedReplyIsCorrupt(t *testing.T) {
	s := &Store{prefix: "idem:"}
	now := time.Now()
	replies := map[store.OpKind][][]any{
		store.OpClaim:    {{}, {nil}, {"one"}, {0}, {4}, {2, "x", "v", "", int64(1), "o", int64(0), int64(1), int64(0)}},
		store.OpComplete: {{}, {nil}, {true}, {3}, {7}, {2, "p", "v", "", int64(0), int64(1), int64(0)}},
		store.OpRelease:  {{}, {"x"}, {2}},
		store.OpRenew:    {{}, {5}},
		store.OpGet:      {{}, {true}, {1}, {3}, {2, "r", "v", "", int64(1), "o", int64(0), int64(1), int64(0)}},
		store.OpForget:   {{}, {-2}, {2}, {4}},
	}
	for kind, rs := range replies {
		for _, vals := range rs {
			op := &store.Op{Kind: kind, Key: "order-1", Claim: store.ClaimRequest{Owner: "o"},
				Token: store.Token{Fence: 1, Owner: "o"}, TTL: time.Hour}
			decodeReply(s, op, vals, nil, now)
			var ce *CorruptError
			if !errors.As(op.Err, &ce) || ce.Key != "order-1" {
				t.Errorf("%v reply %#v: err %v, result %+v; want a *CorruptError", kind, vals, op.Err, op.Result)
			}
		}
	}
}

// A record whose PTTL or completion time was set by hand beyond anything
// the store writes (a TTL over store.MaxDuration, a completion time far
// from the server's clock) is a *CorruptError. Its times used to overflow
// time.Duration silently: a record kept for 9e18 ms came back expiring in
// the past.
func TestHandSetTimesAreCorrupt(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	s, err := New(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	nowMs := time.Now().UnixMilli()
	cases := map[string]struct {
		ca   string
		pttl int64
	}{
		"ttl-9e18ms":     {strconv.FormatInt(nowMs, 10), 9e18},
		"ttl-101y":       {strconv.FormatInt(nowMs, 10), int64(store.MaxDuration/time.Millisecond) + 86_400_000},
		"created-neg":    {"-1000000000000000", 60_000},
		"created-1e300":  {"1e300", 60_000},
		"created-future": {strconv.FormatInt(nowMs+int64(store.MaxDuration/time.Millisecond)+86_400_000, 10), 60_000},
	}
	for key, tc := range cases {
		rk := s.RecordKey(key)
		if err := c.HSet(ctx, rk, "st", "c", "fen", "1", "own", "o", "res", `"v"`, "ca", tc.ca).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "PEXPIRE", rk, tc.pttl).Err(); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		rec, err := s.Get(ctx, key)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: Get = created %v, expires %v, %v; want a *CorruptError", key, rec.CreatedAt, rec.ExpiresAt, err)
		}
	}
	// A lease end set by hand far away: the lease left overflowed too.
	for key, lu := range map[string]string{"lease-1e300": "1e300", "lease-200y": strconv.FormatInt(nowMs+200*365*86_400_000, 10)} {
		rk := s.RecordKey(key)
		if err := c.HSet(ctx, rk, "st", "p", "fen", "1", "own", "other", "lu", lu, "fp", "").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.PExpire(ctx, rk, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "me", Lease: time.Minute, TTL: time.Hour})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: Claim = %+v, %v; want a *CorruptError", key, res, err)
		}
	}
	// The limits themselves are records the store can have written.
	for key, pttl := range map[string]int64{"ttl-100y": int64(store.MaxDuration / time.Millisecond), "ttl-1ms": 1000} {
		rk := s.RecordKey(key)
		if err := c.HSet(ctx, rk, "st", "c", "fen", "1", "own", "o", "res", `"v"`, "ca", strconv.FormatInt(nowMs, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "PEXPIRE", rk, pttl).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, key); err != nil {
			t.Errorf("%s: Get = %v", key, err)
		}
	}
}
