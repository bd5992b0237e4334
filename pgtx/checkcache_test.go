package pgtx_test

import (
	"context"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// pgtx remembers which pools passed the same-database check per store; a
// program that opens and closes stores must not keep every one of them
// (and its pool) alive through that memory.
func TestClosedStoresAreNotKept(t *testing.T) {
	e := newEnv(t, shared)
	var stores []weak.Pointer[pgstore.Store]
	for i := range 3 {
		func() {
			st, err := pgstore.New(bg, e.work, pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rt, err := idem.New(idem.Options{Store: st})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pgtx.Do(bg, rt, e.work, "kept-"+runID(), func(ctx context.Context, tx pgx.Tx) (int, error) {
				return i, nil
			}); err != nil {
				t.Fatal(err)
			}
			w := weak.Make(st)
			if !pgtx.Remembers(w) {
				t.Fatal("the checked store is not remembered: every call would check again")
			}
			stores = append(stores, w)
			ctx, cancel := context.WithTimeout(bg, 10*time.Second)
			defer cancel()
			if err := rt.Close(ctx); err != nil {
				t.Fatal(err)
			}
			st.Close()
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		kept := 0
		for _, w := range stores {
			if pgtx.Remembers(w) {
				kept++
			}
		}
		if kept == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d stores still remembered after they and their runtimes were closed and dropped", kept, len(stores))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
