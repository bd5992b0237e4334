package idem_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/keyshard"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Clearing a scope: every completed key in it is forgotten, a page at a
// time; keys in progress are skipped and listed; nothing else is touched.

// doAll runs each key once, to a stored result.
func doAll(t *testing.T, rt *idem.Runtime, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := idem.Do(bg, rt, k, idemtest.Value("v")); err != nil {
			t.Fatal(err)
		}
	}
}

// stored reports which of keys have a result in st.
func stored(t *testing.T, st store.Store, keys ...string) []string {
	t.Helper()
	var have []string
	for _, k := range keys {
		_, err := st.Get(bg, k)
		switch {
		case err == nil:
			have = append(have, k)
		case !errors.Is(err, store.ErrNotFound):
			t.Fatal(err)
		}
	}
	return have
}

func TestClearScopes(t *testing.T) {
	key := func(ns, ver, k string) string { return store.BuildKey(k, store.Scope{Namespace: ns, Version: ver}) }
	all := []string{
		key("acme", "v1", "a"), key("acme", "v1", "b"), key("acme", "v2", "a"), key("acme", "", "a"),
		key("acme:v1", "x", "a"), key("acme2", "v1", "a"), key("", "v1", "a"), key("", "", "a"), "raw-key",
	}
	for _, c := range []struct {
		scope store.Scope
		kept  []string // of all, by index
	}{
		{store.Scope{Namespace: "acme", Version: "v1"}, []string{all[2], all[3], all[4], all[5], all[6], all[7], all[8]}},
		{store.Scope{Namespace: "acme"}, []string{all[4], all[5], all[6], all[7], all[8]}},
		{store.Scope{Namespace: "acme:v1"}, []string{all[0], all[1], all[2], all[3], all[5], all[6], all[7], all[8]}},
		{store.Scope{Version: "v1"}, []string{all[0], all[1], all[2], all[3], all[4], all[5], all[7], all[8]}},
		{store.Scope{}, nil},
	} {
		t.Run(fmt.Sprintf("%+v", c.scope), func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			rt := idemtest.Runtime(t, idem.Options{Store: mem})
			doAll(t, rt, all...)
			res, err := rt.Clear(bg, c.scope, idem.ClearOptions{All: c.scope == store.Scope{}})
			cleared := len(all) - len(c.kept)
			if err != nil || res.Scanned != cleared || res.Deleted != cleared || res.Skipped != 0 || len(res.SkippedKeys) != 0 {
				t.Fatalf("%+v, %v; want %d scanned and deleted", res, err, cleared)
			}
			if have := stored(t, mem, all...); !slices.Equal(have, c.kept) {
				t.Fatalf("kept %q, want %q", have, c.kept)
			}
		})
	}
}

// Keys in progress are skipped, listed (up to MaxSkippedKeys) and left
// running: their runs store their results as if nothing had happened.
func TestClearSkipsKeysInProgress(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem})
	other := idemtest.Runtime(t, idem.Options{Store: mem}) // another instance
	scope := store.Scope{Namespace: "t"}
	var busy []string
	var chans []<-chan idemtest.Result
	g := idemtest.NewGate()
	for i := range 5 {
		k := store.BuildKey(fmt.Sprint("busy-", i), scope)
		busy = append(busy, k)
		r := rt
		if i%2 == 1 {
			r = other
		}
		chans = append(chans, idemtest.GoDo(bg, r, k, g.Fn("late", nil)))
		<-g.Started
	}
	done := []string{store.BuildKey("done-1", scope), store.BuildKey("done-2", scope)}
	doAll(t, rt, done...)

	res, err := rt.Clear(bg, scope, idem.ClearOptions{MaxSkippedKeys: 3})
	if err != nil || res.Scanned != 7 || res.Deleted != 2 || res.Skipped != 5 || len(res.SkippedKeys) != 3 {
		t.Fatalf("%+v, %v", res, err)
	}
	for _, k := range res.SkippedKeys {
		if !slices.Contains(busy, k) {
			t.Fatalf("skipped %q, which is not in progress", k)
		}
	}
	close(g.Open)
	for _, ch := range chans {
		if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "late" || r.Out != idem.Executed {
			t.Fatalf("a run in progress during Clear: %+v", r)
		}
	}
	if have := stored(t, mem, append(busy, done...)...); !slices.Equal(have, busy) {
		t.Fatalf("stored after Clear: %q, want the runs that were in progress", have)
	}
}

// Clear drops what it deletes from this runtime's cache: the next call
// runs again.
func TestClearDropsFromTheCache(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	k := store.BuildKey("k", store.Scope{Namespace: "n"})
	doAll(t, rt, k)
	idemtest.Eventually(t, "the result cached", func() bool {
		_, err := idem.Get[string](bg, rt, k) // from the cache once the shard has it
		return err == nil
	})
	if _, err := rt.Clear(bg, store.Scope{Namespace: "n"}, idem.ClearOptions{}); err != nil {
		t.Fatal(err)
	}
	var out idem.Outcome
	if v, err := idem.Do(bg, rt, k, idemtest.Value("again"), idem.WithOutcome(&out)); err != nil || v != "again" || out != idem.Executed {
		t.Fatalf("after Clear: %q %v %v, want a new run", v, err, out)
	}
}

// Pages: Progress sees the totals grow; ctx is honoured between pages.
func TestClearPagesAndProgress(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	scope := store.Scope{Namespace: "p", Version: "1"}
	var keys []string
	for i := range 25 {
		keys = append(keys, store.BuildKey(fmt.Sprint(i), scope))
	}
	doAll(t, rt, keys...)
	var seen []int
	res, err := rt.Clear(bg, scope, idem.ClearOptions{PageSize: 10, Progress: func(r idem.ClearResult) { seen = append(seen, r.Deleted) }})
	if err != nil || res.Deleted != 25 || len(seen) < 3 || seen[len(seen)-1] != 25 || !slices.IsSorted(seen) {
		t.Fatalf("%+v %v, progress %v", res, err, seen)
	}

	doAll(t, rt, keys...)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	res, err = rt.Clear(ctx, scope, idem.ClearOptions{PageSize: 10, Progress: func(idem.ClearResult) { cancel() }})
	if !errors.Is(err, context.Canceled) || res.Deleted == 0 || res.Deleted >= 25 {
		t.Fatalf("cancelled after the first page: %+v, %v", res, err)
	}
}

// forgetFails is a memstore whose Forget fails as a store that is down
// does, and that (hiding store.InProcess) the runtime batches.
type forgetFails struct{ store.Store }

func (f forgetFails) Scan(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	return f.Store.(store.Scanner).Scan(ctx, prefix, cursor, limit)
}

func (forgetFails) Forget(context.Context, string) error { return errDown }

func TestClearRefuses(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{Store: plainStore{memstore.New(memstore.Options{})}})
	if _, err := rt.Clear(bg, store.Scope{}, idem.ClearOptions{All: true}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("a store without Scanner: %v", err)
	}
	// The zero Scope (empty variables) clears nothing without All.
	mem := memstore.New(memstore.Options{})
	rt = idemtest.Runtime(t, idem.Options{Store: mem})
	doAll(t, rt, "a", store.BuildKey("b", store.Scope{Namespace: "n"}))
	if res, err := rt.Clear(bg, store.Scope{}, idem.ClearOptions{}); !errors.Is(err, idem.ErrInvalidArgument) || res.Scanned != 0 {
		t.Fatalf("the zero Scope without All: %+v %v", res, err)
	}
	if have := stored(t, mem, "a", store.BuildKey("b", store.Scope{Namespace: "n"})); len(have) != 2 {
		t.Fatalf("the zero Scope without All deleted keys: %q left", have)
	}
	for _, o := range []idem.ClearOptions{{PageSize: -1}, {MaxSkippedKeys: -1}} {
		if _, err := rt.Clear(bg, store.Scope{}, o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	broken := idemtest.Runtime(t, idem.Options{Store: forgetFails{memstore.New(memstore.Options{})}})
	doAll(t, broken, "a", "b")
	var se *idem.StoreError
	if res, err := broken.Clear(bg, store.Scope{}, idem.ClearOptions{All: true}); !errors.As(err, &se) || se.Op != "forget" || res.Scanned != 2 || res.Deleted != 0 {
		t.Fatalf("store down: %+v, %v", res, err)
	}
	closed, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Clear(bg, store.Scope{}, idem.ClearOptions{All: true}); !errors.Is(err, idem.ErrClosed) {
		t.Fatalf("closed runtime: %v", err)
	}
}

// A run whose result has reached the store while its shard has not had
// the store's answer yet is in flight here: Clear skips it, as it skips a
// key held in the store, and its result stays, in the store and in the
// cache alike (it deleted nothing that the shard then cached again).
func TestClearSkipsKeyFinishingHere(t *testing.T) {
	st := newPausable()
	rt := idemtest.Runtime(t, idem.Options{Store: st})
	st.pauseNext(store.OpComplete)
	owner := idemtest.GoDo(bg, rt, "k", idemtest.Value("old"))
	st.waitPaused(t, store.OpComplete)
	res, err := rt.Clear(bg, store.Scope{}, idem.ClearOptions{All: true})
	st.resume <- struct{}{}
	if err != nil || res.Scanned != 1 || res.Deleted != 0 || res.Skipped != 1 || !slices.Equal(res.SkippedKeys, []string{"k"}) {
		t.Fatalf("Clear during the run's Complete: %+v, %v; want k skipped", res, err)
	}
	if r := idemtest.Recv(t, owner); r.Err != nil || r.V != "old" {
		t.Fatalf("the run: %+v", r)
	}
	if have := stored(t, st.mem, "k"); len(have) != 1 {
		t.Fatal("the skipped run's result is not in the store")
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "old" {
		t.Fatalf("after Clear: %q %v, want the kept result", v, err)
	}
}

// A call of a key that comes while Clear deletes it reads the record
// before the delete: it gets the old result, as a call just before Clear
// would, but does not cache it; once Clear returns, the key runs again.
func TestClearCallDuringTheDelete(t *testing.T) {
	st := newPausable()
	rt := idemtest.Runtime(t, idem.Options{Store: st})
	doAll(t, rt, "k") // a batched store: cached when Do returns
	st.pauseNext(store.OpForget)
	type clearDone struct {
		res idem.ClearResult
		err error
	}
	cleared := make(chan clearDone, 1)
	go func() {
		res, err := rt.Clear(bg, store.Scope{}, idem.ClearOptions{All: true})
		cleared <- clearDone{res, err}
	}()
	st.waitPaused(t, store.OpForget)
	var out idem.Outcome
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), idem.WithOutcome(&out)); err != nil || v != "v" || out != idem.Replayed {
		t.Fatalf("a call during the delete: %q %v %v, want the old result", v, err, out)
	}
	st.resume <- struct{}{}
	if c := idemtest.Recv(t, cleared); c.err != nil || c.res.Deleted != 1 {
		t.Fatalf("Clear: %+v, %v", c.res, c.err)
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.Value("again"), idem.WithOutcome(&out)); err != nil || v != "again" || out != idem.Executed {
		t.Fatalf("after Clear: %q %v %v, want a new run", v, err, out)
	}
}

// Clear's context ends in the middle of a page's delete: every key the
// store deleted has left the cache too, on every shard.
func TestClearCancelledDuringTheDelete(t *testing.T) {
	const shards = 8
	var keys []string // on as many shards
	seen := make(map[int]bool)
	for i := 0; len(keys) < 6; i++ {
		k := fmt.Sprint("k", i)
		if sh := keyshard.Index(k, shards); !seen[sh] {
			seen[sh] = true
			keys = append(keys, k)
		}
	}
	for range 5 { // the bug this guards against lost a race
		st := newPausable()
		ctx, cancel := context.WithCancel(bg)
		st.forgot = func(n int) {
			if n == 3 {
				cancel()
			}
		}
		rt := idemtest.Runtime(t, idem.Options{Store: st, Shards: shards})
		doAll(t, rt, keys...) // a batched store: cached when Do returns
		res, err := rt.Clear(ctx, store.Scope{}, idem.ClearOptions{All: true})
		cancel()
		have := stored(t, st.mem, keys...)
		if !errors.Is(err, context.Canceled) || res.Deleted != len(keys)-len(have) || res.Deleted == 0 {
			t.Fatalf("Clear: %+v, %v; %d of %d keys kept", res, err, len(have), len(keys))
		}
		for _, k := range keys {
			if slices.Contains(have, k) {
				continue
			}
			var out idem.Outcome
			if _, err := idem.Do(bg, rt, k, idemtest.Value("again"), idem.WithOutcome(&out)); err != nil || out != idem.Executed {
				t.Fatalf("%s, deleted from the store: %v %v, want a new run (not a replay from the cache)", k, err, out)
			}
		}
	}
}

// Clear drops from this runtime's cache the keys of the scope that the
// store no longer has (another instance forgot them), and no others.
func TestClearDropsKeysGoneFromTheStore(t *testing.T) {
	st := newPausable()
	rt := idemtest.Runtime(t, idem.Options{Store: st})
	other := idemtest.Runtime(t, idem.Options{Store: st.mem})
	in, out := store.BuildKey("k", store.Scope{Namespace: "in"}), store.BuildKey("k", store.Scope{Namespace: "out"})
	doAll(t, rt, in, out) // a batched store: cached when Do returns
	for _, k := range []string{in, out} {
		if err := other.Forget(bg, k); err != nil {
			t.Fatal(err)
		}
		if v, err := idem.Get[string](bg, rt, k); err != nil || v != "v" {
			t.Fatalf("%s: %q %v, want the result this runtime caches", k, v, err)
		}
	}
	if res, err := rt.Clear(bg, store.Scope{Namespace: "in"}, idem.ClearOptions{}); err != nil || res.Scanned != 0 {
		t.Fatalf("Clear: %+v, %v; want nothing in the store", res, err)
	}
	var o idem.Outcome
	if v, err := idem.Do(bg, rt, in, idemtest.Value("again"), idem.WithOutcome(&o)); err != nil || v != "again" || o != idem.Executed {
		t.Fatalf("in the scope: %q %v %v, want a new run", v, err, o)
	}
	if v, err := idem.Get[string](bg, rt, out); err != nil || v != "v" {
		t.Fatalf("out of the scope: %q %v, want it still cached", v, err)
	}
}
