package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

// seedScopes stores, in tenant-a/v1, n completed keys, one failed and one
// in progress; in tenant-a/v2 and tenant-b/v1 one completed key each; and a
// foreign Redis key at a record's name in tenant-a/v1. It returns the keys
// a clear of tenant-a/v1 deletes, and the token of the key in progress.
func seedScopes(f *fixture, n int) ([]string, store.Token) {
	var del []string
	for i := range n {
		k := store.BuildKey(fmt.Sprint("order-", i), scopeA)
		f.done(k, store.Record{Value: []byte(strings.Repeat("v", i+1))}, time.Duration(i+1)*time.Hour)
		del = append(del, k)
	}
	failed := store.BuildKey("declined", scopeA)
	f.done(failed, store.Record{Failed: true, Error: "card declined"}, 30*time.Second)
	del = append(del, failed)
	tok := f.claim(store.BuildKey("running", scopeA), "owner-1", time.Minute, nil)
	f.done(store.BuildKey("order-0", store.Scope{Namespace: "tenant-a", Version: "v2"}), store.Record{Value: []byte("v")}, time.Hour)
	f.done(store.BuildKey("order-0", store.Scope{Namespace: "tenant-b", Version: "v1"}), store.Record{Value: []byte("v")}, time.Hour)
	if err := f.c.Set(bg, f.s.RecordKey(store.BuildKey("foreign", scopeA)), "x", 0).Err(); err != nil {
		f.t.Fatal(err)
	}
	slices.Sort(del)
	return del, tok
}

var scopeAFlags = []string{"-namespace", "tenant-a", "-version", "v1"}

// checkClear runs a dry run, then a clear, of tenant-a/v1 on f: the dry run
// deletes nothing, the clear deletes the scope's results only, and the key
// in progress is skipped and stays its owner's.
func checkClear(t *testing.T, f *fixture, n, page int) {
	del, tok := seedScopes(f, n)
	flags := append(slices.Clone(scopeAFlags), "-page", fmt.Sprint(page), "-json", "clear")
	running := store.BuildKey("running", scopeA)

	var dry clearReport
	f.idem(append(flags, "-dry-run")...).want(t, exitOK).decode(t, &dry)
	slices.Sort(dry.Keys)
	if !dry.DryRun || dry.Deleted != len(del) || !slices.Equal(dry.Keys, del) {
		t.Fatalf("dry run would delete %d %q, want %d %q", dry.Deleted, dry.Keys, len(del), del)
	}
	if len(dry.Skipped) != 1 || dry.Skipped[0].Key != running || dry.Skipped[0].Owner != "owner-1" || dry.Skipped[0].LeaseLeftMs <= 0 {
		t.Fatalf("dry run skipped %+v, want the key in progress", dry.Skipped)
	}
	if len(dry.NotIdem) != 1 || !strings.Contains(dry.NotIdem[0].Reason, "not a v3 record") {
		t.Fatalf("dry run: not idem's %+v, want the foreign key", dry.NotIdem)
	}
	for _, k := range del {
		if f.state(k) != store.Done {
			t.Fatalf("the dry run deleted %q", k)
		}
	}

	var rep clearReport
	f.idem(append(flags, "-yes")...).want(t, exitOK).decode(t, &rep)
	slices.Sort(rep.Keys)
	if rep.DryRun || rep.Deleted != len(del) || !slices.Equal(rep.Keys, del) || len(rep.Skipped) != 1 || len(rep.NotIdem) != 1 {
		t.Fatalf("clear: %+v", rep)
	}
	for _, k := range del {
		if f.state(k) != store.Absent {
			t.Fatalf("clear left %q", k)
		}
	}
	if f.state(running) != store.Held {
		t.Fatal("clear broke the key in progress")
	}
	if _, err := f.s.Complete(bg, running, tok, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatalf("the owner of the key in progress could not complete it after the clear: %v", err)
	}
	for _, other := range []store.Scope{{Namespace: "tenant-a", Version: "v2"}, {Namespace: "tenant-b", Version: "v1"}} {
		if f.state(store.BuildKey("order-0", other)) != store.Done {
			t.Fatalf("clear of tenant-a/v1 deleted a key of %+v", other)
		}
	}
	if n, err := f.c.Exists(bg, f.s.RecordKey(store.BuildKey("foreign", scopeA))).Result(); err != nil || n != 1 {
		t.Fatalf("clear deleted the foreign key (%d, %v)", n, err)
	}
}

func TestClear(t *testing.T) {
	t.Parallel()
	checkClear(t, single(t), 25, 4)
}

// The human output of clear: each key, then the counts.
func TestClearText(t *testing.T) {
	t.Parallel()
	f := single(t)
	seedScopes(f, 2)
	r := f.idem(append(slices.Clone(scopeAFlags), "clear", "-dry-run")...).want(t, exitOK)
	for _, want := range []string{
		"would delete ff:idemp:tenant-a:v1:order-1\n",
		"skipped ff:idemp:tenant-a:v1:running: in progress (owner owner-1",
		"is not an idem record: not a v3 record",
		"would delete 3 records; skipped 1 in progress; 1 not idem records",
		"dry run: nothing was deleted",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, r.out)
		}
	}
	r = f.idem(append(slices.Clone(scopeAFlags), "clear", "-yes")...).want(t, exitOK)
	if !strings.Contains(r.out, "deleted 3 records; skipped 1 in progress") {
		t.Errorf("clear output:\n%s", r.out)
	}
	// Every version of tenant-a: the v2 key goes too.
	r = f.idem("-namespace", "tenant-a", "-all-versions", "clear", "-yes").want(t, exitOK)
	if !strings.Contains(r.out, "deleted ff:idemp:tenant-a:v2:order-0\n") || !strings.Contains(r.out, "deleted 1 records") {
		t.Errorf("clear of every version:\n%s", r.out)
	}
	if f.state(store.BuildKey("order-0", store.Scope{Namespace: "tenant-b", Version: "v1"})) != store.Done {
		t.Error("clear of tenant-a deleted tenant-b's key")
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	f := single(t)
	seedScopes(f, 9) // values of 1..9 bytes, TTLs of 1..9 hours
	f.claim(store.BuildKey("stale", scopeA), "gone", time.Millisecond, nil)
	time.Sleep(5 * time.Millisecond)
	var rep statsReport
	f.idem(append(slices.Clone(scopeAFlags), "stats", "-json", "-page", "3")...).want(t, exitOK).decode(t, &rep)
	want := statsReport{Prefix: "ff:idemp:tenant-a:v1:", Keys: 13, Completed: 9, Failed: 1, InProgress: 2, LeaseEnded: 1, NotIdem: 1}
	got := rep
	got.ValueBytes, got.TTLLeft = nil, nil
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stats counts %+v, want %+v", got, want)
	}
	if v := rep.ValueBytes; v == nil || v.Min != 1 || v.Median != 5 || v.Max != 9 || v.Total != 45 {
		t.Errorf("value sizes %+v, want 1, 5, 9, total 45", v)
	}
	counts := map[string]int{}
	for _, b := range rep.TTLLeft {
		counts[b.Label] = b.Count
	}
	if counts["< 1m"] != 1 || counts["1m - 1h"] != 1 || counts["1h - 1d"] != 8 || len(rep.TTLLeft) != 5 {
		t.Errorf("TTL left %+v, want 1 under a minute, 1 under an hour, 8 under a day", rep.TTLLeft)
	}
	r := f.idem(append(slices.Clone(scopeAFlags), "stats")...).want(t, exitOK)
	for _, w := range []string{"completed    9", "in progress  2 (lease ended: 1)", "min 1 B, median 5 B, max 9 B", "1h - 1d    8"} {
		if !strings.Contains(r.out, w) {
			t.Errorf("stats output lacks %q:\n%s", w, r.out)
		}
	}
}

// A clear that fails part way prints what it did before the error, in
// -json too, then the error, and exits 1. Here Redis refuses to delete one
// record: the command's user may DEL the keys of the ok-* records only (a
// forget script's DEL runs as the calling user).
func TestClearFailsPartWay(t *testing.T) {
	t.Parallel()
	f := single(t)
	var ok []string
	for i := range 20 {
		ok = append(ok, fmt.Sprint("ok-", i))
	}
	f.done("stuck", store.Record{Value: []byte("v")}, time.Hour)
	okNames := strings.TrimSuffix(f.s.RecordKey("ok-"), "}") + "*"
	err := f.c.Do(bg, "ACL", "SETUSER", "clerk", "on", ">pw", "~*", "&*", "+@all", "-del", "(+del ~"+okNames+")").Err()
	if err != nil {
		t.Fatal(err)
	}
	addr := f.c.(*redis.Client).Options().Addr
	for _, mode := range []string{"-json", "-text"} {
		for _, k := range ok {
			if f.state(k) == store.Absent { // deleted by the last mode
				f.done(k, store.Record{Value: []byte("v")}, time.Hour)
			}
		}
		args := []string{"-redis", "redis://clerk:pw@" + addr + "/0", "-store-prefix", f.flags[len(f.flags)-1], "-page", "3", "clear", "-yes", "-all"}
		if mode == "-json" {
			args = append(args, "-json")
		}
		r := idem(t, args...).want(t, exitFailed)
		if !strings.Contains(r.err, `forget "stuck"`) {
			t.Errorf("%s: stderr %q, want the refused delete of stuck", mode, r.err)
		}
		var deleted []string
		if mode == "-json" {
			var rep clearReport
			r.decode(t, &rep)
			if rep.Deleted != len(rep.Keys) || rep.Error == "" || slices.Contains(rep.Keys, "stuck") {
				t.Errorf("-json: partial report %+v, want the keys deleted before the error, and the error", rep)
			}
			deleted = rep.Keys
		} else {
			for line := range strings.Lines(r.out) {
				if k, ok := strings.CutPrefix(strings.TrimSpace(line), "deleted "); ok && !strings.Contains(k, " ") {
					deleted = append(deleted, k)
				}
			}
			if !strings.Contains(r.out, fmt.Sprintf("deleted %d records", len(deleted))) || !strings.Contains(r.out, "stopped") {
				t.Errorf("text: partial report\n%s\nwant the keys deleted, the counts, and that it stopped", r.out)
			}
		}
		for _, k := range deleted {
			if !slices.Contains(ok, k) || f.state(k) != store.Absent {
				t.Errorf("%s: reported %q deleted", mode, k)
			}
		}
		if f.state("stuck") != store.Done {
			t.Fatalf("%s: stuck was deleted", mode)
		}
	}
}
