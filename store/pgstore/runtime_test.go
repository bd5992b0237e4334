package pgstore_test

import (
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

func newRuntime(t testing.TB, opts idem.Options) *idem.Runtime { return idemtest.Runtime(t, opts) }

func eventually(t testing.TB, what string, cond func() bool) { idemtest.Eventually(t, what, cond) }

// instance returns a store on table, on a pool of its own, as another
// process of the same service would have: instances on one table see the
// same keys.
func instance(t testing.TB, dsn, table string) *pgstore.Store {
	t.Helper()
	return newStore(t, newPool(t, dsn), pgstore.Options{Table: table})
}

// A storm on one runtime over PostgreSQL; see storesuite.Storm.
func TestRuntimeStorm(t *testing.T) {
	t.Parallel()
	storesuite.Storm(t, newStore(t, sharedPool(t), pgstore.Options{}))
}

// Duplicates on several instances (runtimes with pools of their own, as
// separate processes have) over overlapping keys; see storesuite.SharedKeys.
func TestRuntimesShareATable(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	storesuite.SharedKeys(t, func(t testing.TB) store.Store { return instance(t, dsn, table) })
}
