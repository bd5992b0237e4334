package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
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
		store.OpClaim: {{}, {nil}, {"one"}, {0}, {4}, {2, "3x01:1:o0:0:v", int64(1)},
			{2, "3p01:1:o0:0:", int64(1)}, {3, "3c01:1:o10:0:v", int64(1)}, {2, "2c01:1:o10:0:v", int64(1)}},
		store.OpComplete: {{}, {nil}, {true}, {3}, {7}, {2, "3p01:1:o0:0:", int64(1)}},
		store.OpRelease:  {{}, {"x"}, {2}},
		store.OpRenew:    {{}, {5}},
		store.OpGet:      {{}, {true}, {1}, {3}, {2, "3r01:1:o0:0:", int64(1)}, {2, "3c01:1:o10:0:v"}},
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

// A record whose PTTL or TTL field was set by hand beyond anything the
// store writes (a TTL over store.MaxDuration, a PTTL longer than the TTL
// the record was stored with, a lease far away) is a *CorruptError, never
// times that overflow time.Duration (a record kept for 9e18 ms once came
// back expiring in the past).
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
	maxMs := int64(store.MaxDuration / time.Millisecond)
	completed := func(ttl int64) string { return "3c01:1:o" + strconv.FormatInt(ttl, 10) + ":0:\"v\"" }
	write := func(key, value string, pttl int64) string {
		rk := s.RecordKey(key)
		if err := c.Do(ctx, "SET", rk, value, "PX", pttl).Err(); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return rk
	}
	cases := map[string]struct {
		value string
		pttl  int64
	}{
		"ttl-9e18ms":   {completed(60_000), 9e18},
		"ttl-101y":     {completed(maxMs + 86_400_000), maxMs + 86_400_000},
		"pttl-over":    {completed(60_000), 120_000},
		"ttl-16digits": {completed(1_000_000_000_000_000), 60_000},
	}
	for key, tc := range cases {
		write(key, tc.value, tc.pttl)
		rec, err := s.Get(ctx, key)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: Get = created %v, expires %v, %v; want a *CorruptError", key, rec.CreatedAt, rec.ExpiresAt, err)
		}
	}
	// A lease set by hand far away: the lease left overflowed too.
	for key, v := range map[string]string{"lease-1e300": "3p01:5:other1" + strings.Repeat("0", 300) + ":0:",
		"lease-200y": "3p01:5:other0:0:"} {
		write(key, v, 200*365*86_400_000)
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "me", Lease: time.Minute, TTL: time.Hour})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: Claim = %+v, %v; want a *CorruptError", key, res, err)
		}
	}
	// The limits themselves are records the store can have written.
	for key, ttl := range map[string]int64{"ttl-100y": maxMs, "ttl-1ms": 1} {
		write(key, completed(ttl), ttl)
		_, err := s.Get(ctx, key)
		if ttl == 1 && errors.Is(err, store.ErrNotFound) {
			continue // it lived its millisecond before the Get came (a loaded machine): not corrupt either
		}
		if err != nil {
			t.Errorf("%s: Get = %v", key, err)
		}
	}
}
