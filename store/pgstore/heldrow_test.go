package pgstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// A key's row held by a completion waiting for its caller's COMMIT delays
// the batches that touch it by the lock timeout, not by the lock timeout
// again for every repeat of the op that waits on it: a renewal sent as
// its owner completes (Set.Quiet races the shard's renew timer) must not
// hold up the other keys of its batch, and of its shard, for seconds.
func TestHeldRowDelaysItsBatchOnce(t *testing.T) {
	t.Parallel()
	const wait = 200 * time.Millisecond
	pool := sharedPool(t)
	s := newStore(t, pool, pgstore.Options{LockTimeout: wait})
	res, err := s.Claim(bg, "a", store.ClaimRequest{Owner: "o1", Lease: time.Minute, TTL: time.Minute})
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	tx, err := pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := s.CompleteIn(bg, tx, "a", res.Token, store.Record{Value: []byte(`1`)}, time.Minute, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	renew := &store.Op{Kind: store.OpRenew, Key: "a", Token: res.Token, Lease: time.Minute}
	claim := &store.Op{Kind: store.OpClaim, Key: "b", Claim: store.ClaimRequest{Owner: "o2", Lease: time.Minute, TTL: time.Minute}}
	start := time.Now()
	s.Batch(bg, []*store.Op{renew, claim})
	took := time.Since(start)
	if claim.Err != nil || claim.Result.Status != store.Claimed {
		t.Fatalf("claim of b = %+v, %v", claim.Result, claim.Err)
	}
	if renew.Err == nil || !store.Retryable(renew.Err) || errors.Is(renew.Err, store.ErrLeaseLost) {
		t.Fatalf("renew of the held key = %v, want a retryable failure", renew.Err)
	}
	if took > 3*wait {
		t.Fatalf("the batch took %v with a lock timeout of %v", took, wait)
	}
}

// PostgreSQL's timeouts stop at INT_MAX milliseconds (about 24.8 days). A
// longer LockTimeout made every batch fail ("invalid value for parameter
// lock_timeout"); it is refused by New. A longer hold (half of a lease of
// more than seven weeks) made every CompleteIn fail; it is cut to the
// longest.
func TestTimeoutsBeyondPostgresRange(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	if _, err := pgstore.New(bg, pool, pgstore.Options{Table: newTable(), LockTimeout: 1000 * time.Hour}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("New with a LockTimeout of 1000h = %v, want ErrInvalidArgument", err)
	}
	s := newStore(t, pool, pgstore.Options{})
	const lease = 60 * 24 * time.Hour
	res, err := s.Claim(bg, "a", store.ClaimRequest{Owner: "o1", Lease: lease, TTL: lease})
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("claim: %+v, %v", res, err)
	}
	tx, err := pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := s.CompleteIn(bg, tx, "a", res.Token, store.Record{Value: []byte(`1`)}, time.Hour, lease/2); err != nil {
		t.Fatalf("CompleteIn with a hold of %v: %v", lease/2, err)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Get(bg, "a"); err != nil || string(rec.Value) != `1` {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
}
