package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// A record stored under a key longer than store.MaxKeyLen (a scoped store
// of an older version wrote it) does not stop stats, list or clear: it is
// counted and listed as not readable, and the keys after it are reached.
func TestOverLongStoredKey(t *testing.T) {
	f := single(t)
	f.done(store.BuildKey("short", scopeA), store.Record{Value: []byte("v")}, time.Hour)
	f.done(store.BuildKey("later", scopeA), store.Record{Value: []byte("v")}, time.Hour)
	long := store.BuildKey(strings.Repeat("z", store.MaxKeyLen), scopeA)
	if err := f.c.Copy(bg, f.s.RecordKey(store.BuildKey("short", scopeA)), f.s.RecordKey(long), 0, false).Err(); err != nil {
		t.Fatal(err)
	}
	var st statsReport
	f.idem("-json", "-page", "1", "stats").want(t, exitOK).decode(t, &st)
	if st.Completed != 2 || st.NotIdem != 1 {
		t.Errorf("stats: %+v", st)
	}
	var page listReport
	f.idem("-json", "-page", "1", "list").want(t, exitOK).decode(t, &page)
	if len(page.Keys) != 2 || page.NotIdem != 1 {
		t.Errorf("list: %+v", page)
	}
	f.idem("get", long).want(t, exitUsage)
	var cl clearReport
	f.idem("-json", "-page", "1", "clear", "-yes", "-all").want(t, exitOK).decode(t, &cl)
	if cl.Deleted != 2 || len(cl.NotIdem) != 1 || !strings.Contains(cl.NotIdem[0].Reason, "over the 1024-byte limit") {
		t.Errorf("clear: %+v", cl)
	}
}
