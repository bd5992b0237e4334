package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// The runtime's Clear, Get and State on PostgreSQL (Scan's pages and
// Inspect), from one instance, seen by another.
func TestClearGetAndState(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	a := newRuntime(t, idem.Options{Store: instance(t, dsn, table)})
	b := newRuntime(t, idem.Options{Store: instance(t, dsn, table)})
	acme, globex := store.Scope{Namespace: "acme", Version: "v1"}, store.Scope{Namespace: "globex", Version: "v1"}
	var keys, others []string
	for i := range 40 {
		keys = append(keys, store.BuildKey(fmt.Sprint("o-", i), acme))
		others = append(others, store.BuildKey(fmt.Sprint("o-", i), globex))
	}
	var wg sync.WaitGroup
	for _, k := range append(keys, others...) {
		wg.Go(func() {
			if _, err := idem.Do(bg, a, k, func(context.Context) (string, error) { return "v", nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	g := idemtest.NewGate()
	busy := store.BuildKey("busy", acme)
	ch := idemtest.GoDo(bg, a, busy, g.Fn("late", nil))
	<-g.Started
	if st, err := b.State(bg, busy); err != nil || st.Status != idem.KeyInProgress || st.HeldHere {
		t.Fatalf("the busy key seen by b: %+v %v", st, err)
	}
	if st, err := a.State(bg, busy); err != nil || !st.HeldHere {
		t.Fatalf("the busy key seen by a: %+v %v", st, err)
	}
	res, err := b.Clear(bg, acme, idem.ClearOptions{PageSize: 7})
	// Scan returns each key once.
	if err != nil || res.Deleted != 40 || res.Skipped != 1 || !slices.Equal(res.SkippedKeys, []string{busy}) || res.Scanned != 41 {
		t.Fatalf("%+v %v", res, err)
	}
	for _, k := range keys {
		if st, err := a.State(bg, k); err != nil || st.Status != idem.KeyAbsent {
			t.Fatalf("%s after Clear: %+v %v", k, st, err)
		}
	}
	for _, k := range others {
		if v, err := idem.Get[string](bg, b, k); err != nil || v != "v" {
			t.Fatalf("%s of another scope: %q %v", k, v, err)
		}
	}
	close(g.Open)
	if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "late" {
		t.Fatalf("the run in progress during Clear: %+v", r)
	}
	if v, err := idem.Get[string](bg, b, busy); err != nil || v != "late" {
		t.Fatalf("its result: %q %v", v, err)
	}
}
