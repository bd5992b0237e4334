package pgstore_test

import (
	"strings"
	"testing"

	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
)

// A Forget or a Clear on instance A (a pool of its own, one table) reaches
// instance B's cache by NOTIFY; see storesuite.Invalidate.
func TestInvalidate(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	storesuite.Invalidate(t, instance(t, dsn, table), instance(t, dsn, table))
}

// B's read comes back after the invalidation: it caches nothing; see
// storesuite.InvalidateRace.
func TestInvalidateRace(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	storesuite.InvalidateRace(t, instance(t, dsn, table), instance(t, dsn, table))
}

// The listening connections are terminated (pg_terminate_backend of the
// backends that ran LISTEN): once B listens again it drops its whole
// cache; see storesuite.InvalidateLost.
func TestInvalidateLost(t *testing.T) {
	t.Parallel()
	dsn, table := shared.NewDatabase(t), newTable()
	storesuite.InvalidateLost(t, instance(t, dsn, table), instance(t, dsn, table), func() {
		pool := newPool(t, dsn)
		var n int
		err := pool.QueryRow(bg, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`).Scan(&n)
		if err != nil || n == 0 {
			t.Fatalf("terminated %d listeners: %v", n, err)
		}
	})
}

// A key of the largest size is announced whole; a prefix too long for a
// NOTIFY payload is announced as every key.
func TestInvalidateLongKey(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	sa, sb := instance(t, dsn, table), instance(t, dsn, table)
	got := make(chan store.Invalidation, 8)
	stop, err := sb.SubscribeInvalidations(bg, func(inv store.Invalidation) { got <- inv })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	long := strings.Repeat("\xff", store.MaxKeyLen)
	if err := sa.InvalidatePrefix(bg, strings.Repeat("p", 5000)); err != nil {
		t.Fatal(err)
	}
	if inv := idemtest.Recv(t, got); inv != (store.Invalidation{Prefix: true}) {
		t.Fatalf("a long prefix: %+v", inv)
	}
	if err := sa.InvalidatePrefix(bg, long); err != nil {
		t.Fatal(err)
	}
	if inv := idemtest.Recv(t, got); inv != (store.Invalidation{Key: long, Prefix: true}) {
		t.Fatalf("a prefix of the longest key's size: %d bytes, prefix %v", len(inv.Key), inv.Prefix)
	}
}
