package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// corruptRows are rows written by hand that the store cannot read: the
// values of state, fence, owner, lease_until, result, created_at and
// expires_at, as SQL.
var corruptRows = map[string][7]string{
	"bad-state":       {"'zz'", "1", "'o'", "NULL", "'v'", "now()", "now() + interval '1 hour'"},
	"no-lease":        {"'p'", "1", "'o'", "NULL", "NULL", "NULL", "now() + interval '1 hour'"},
	"no-owner":        {"'p'", "1", "''", "now() + interval '1 hour'", "NULL", "NULL", "now() + interval '1 hour'"},
	"no-result":       {"'c'", "1", "'o'", "NULL", "NULL", "now()", "now() + interval '1 hour'"},
	"failed-no-res":   {"'f'", "1", "'o'", "NULL", "NULL", "now()", "now() + interval '1 hour'"},
	"no-created":      {"'c'", "1", "'o'", "NULL", "'v'", "NULL", "now() + interval '1 hour'"},
	"zero-fence":      {"'c'", "0", "'o'", "NULL", "'v'", "now()", "now() + interval '1 hour'"},
	"endless":         {"'c'", "1", "'o'", "NULL", "'v'", "now()", "'infinity'"},
	"far-expiry":      {"'c'", "1", "'o'", "NULL", "'v'", "now()", "now() + interval '500 years'"},
	"created-later":   {"'c'", "1", "'o'", "NULL", "'v'", "now() + interval '1 day'", "now() + interval '2 days'"},
	"lease-past-1000": {"'p'", "1", "'o'", "now() + interval '1000 years'", "NULL", "NULL", "now() + interval '1001 years'"},
}

// insertRow writes a row of key with vals (see corruptRows) into s's table.
func insertRow(t testing.TB, s *pgstore.Store, key string, vals [7]string) {
	t.Helper()
	sql := "INSERT INTO " + s.Table() + " (key, state, fence, owner, lease_until, result, created_at, expires_at) VALUES ($1, " +
		vals[0] + ", " + vals[1] + ", convert_to(" + vals[2] + ", 'UTF8'), " + vals[3] + ", convert_to(" + vals[4] + ", 'UTF8'), " +
		vals[5] + ", " + vals[6] + ")"
	if err := shared.Exec(bg, "postgres", sql, []byte(key)); err != nil {
		t.Fatal(err)
	}
}

// Rows written by hand with fields missing, garbled or out of range are
// reported as errors that name the key: never a panic, never a replay,
// never a run.
func TestCorruptRows(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	rt := newRuntime(t, idem.Options{Store: s, DisableCache: true})
	for key, vals := range corruptRows {
		insertRow(t, s, key, vals)
		var ce *pgstore.CorruptError
		_, err := idem.Do(bg, rt, key, idemtest.MustNotRun(t))
		if !errors.Is(err, idem.ErrStoreUnavailable) || !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: Do = %v; want a *CorruptError naming the key", key, err)
		}
		if _, err := s.Get(bg, key); !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: Get = %v; want a *CorruptError", key, err)
		}
		if _, err := s.Inspect(bg, key); !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s: Inspect = %v; want a *CorruptError", key, err)
		}
		if !errors.Is(err, store.ErrCorrupt) || store.IsContract(err) {
			t.Errorf("%s: %v matches store.ErrCorrupt %v, a contract error %v; want ErrCorrupt only",
				key, err, errors.Is(err, store.ErrCorrupt), store.IsContract(err))
		}
	}
}

// A corrupt row fails its own op in a batch, not the others.
func TestCorruptRowInABatch(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	insertRow(t, s, "bad", corruptRows["bad-state"])
	ops := claims("a", "bad", "b")
	store.Run(bg, s, ops)
	var ce *pgstore.CorruptError
	if !errors.As(ops[1].Err, &ce) {
		t.Errorf("claim of the corrupt row: %v %v, want a *CorruptError", ops[1].Result.Status, ops[1].Err)
	}
	for _, i := range []int{0, 2} {
		if ops[i].Err != nil || ops[i].Result.Status != store.Claimed {
			t.Errorf("claim of %s: %v %v, want claimed", ops[i].Key, ops[i].Result.Status, ops[i].Err)
		}
	}
}

// A row the server cannot take over (its fence at the largest bigint)
// makes the statement fail, which rolls the whole batch back: the store
// runs the batch again op by op, so only that op fails.
func TestServerErrorFailsOneOpOfABatch(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	insertRow(t, s, "overflow", [7]string{"'r'", "9223372036854775807", "'o'", "NULL", "NULL", "NULL", "now() + interval '1 hour'"})
	ops := claims("a", "overflow", "b")
	store.Run(bg, s, ops)
	var pgErr *pgconn.PgError
	if !errors.As(ops[1].Err, &pgErr) || pgErr.Code != "22003" {
		t.Errorf("claim past the largest fence: %v %+v %v, want the server's numeric_value_out_of_range", ops[1].Result.Status, ops[1].Result.Token, ops[1].Err)
	}
	for _, i := range []int{0, 2} {
		if ops[i].Err != nil || ops[i].Result.Status != store.Claimed {
			t.Errorf("claim of %s: %v %v, want claimed", ops[i].Key, ops[i].Result.Status, ops[i].Err)
		}
	}
}

// claims returns a claim op of each key, with owners of their own.
func claims(keys ...string) []*store.Op {
	ops := make([]*store.Op, len(keys))
	for i, k := range keys {
		ops[i] = &store.Op{Kind: store.OpClaim, Key: k,
			Claim: store.ClaimRequest{Owner: "owner-" + k, Lease: time.Hour, TTL: time.Hour}}
	}
	return ops
}
