package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// A Forget in a batch says whether it deleted a result: op.Result.Status is
// store.Completed when it did, and zero when there was nothing to delete
// (an absent key, or a released one, whose record lives on to keep its
// fence rising), whatever the op held before. Runtime.Clear counts deleted
// keys by it. Store.Forget answers nil for both, as the contract wants.
func TestForgetSaysWhetherItDeleted(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	complete := func(key string, rec store.Record) {
		t.Helper()
		res, err := s.Claim(bg, key, claimReq("a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(bg, key, res.Token, rec, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	complete("completed", store.Record{Value: []byte("v")})
	complete("failed", store.Record{Failed: true, Error: "card declined"})
	res, err := s.Claim(bg, "released", claimReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(bg, "released", res.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(bg, "held", claimReq("a")); err != nil {
		t.Fatal(err)
	}

	for round, want := range []map[string]store.Status{
		{"completed": store.Completed, "failed": store.Completed, "released": 0, "absent": 0},
		{"completed": 0, "failed": 0, "released": 0, "absent": 0},
	} {
		var ops []*store.Op
		for _, key := range []string{"completed", "failed", "released", "absent", "held"} {
			// A caller may start every op as "deleted": the store says otherwise.
			ops = append(ops, &store.Op{Kind: store.OpForget, Key: key, Result: store.ClaimResult{Status: store.Completed}})
		}
		s.Batch(bg, ops)
		for _, op := range ops {
			if op.Key == "held" {
				if !errors.Is(op.Err, store.ErrInProgress) {
					t.Errorf("round %d: forget of a key in progress: %v, want ErrInProgress", round, op.Err)
				}
				continue
			}
			if op.Err != nil || op.Result.Status != want[op.Key] {
				t.Errorf("round %d: forget %s: status %v, %v; want status %v and no error",
					round, op.Key, op.Result.Status, op.Err, want[op.Key])
			}
		}
	}
	for _, key := range []string{"completed", "released", "absent"} {
		if err := s.Forget(bg, key); err != nil {
			t.Errorf("Forget(%s) = %v, want nil", key, err)
		}
	}
	// The released key's record is still there, so its next claim's fence
	// is larger than the released one's.
	if n := c.Exists(bg, s.RecordKey("released")).Val(); n != 1 {
		t.Fatal("forget deleted a released key's record")
	}
	if again, err := s.Claim(bg, "released", claimReq("b")); err != nil || again.Token.Fence <= res.Token.Fence {
		t.Fatalf("claim after the forget: %+v, %v; want a fence above %d", again.Token, err, res.Token.Fence)
	}
}
