package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// A record stored under a key longer than store.MaxKeyLen (a scoped store
// of an older version wrote it) does not stop stats or clear, and get and
// forget reach it by its key.
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
	if st.Completed != 3 || st.NotIdem != 0 {
		t.Errorf("stats: %+v", st)
	}
	f.idem("get", long).want(t, exitOK)
	f.idem("forget", long).want(t, exitOK)
	f.idem("get", long).want(t, exitNoRecord)
	var cl clearReport
	f.idem("-json", "-page", "1", "clear", "-yes").want(t, exitOK).decode(t, &cl)
	if cl.Deleted != 2 {
		t.Errorf("clear: %+v", cl)
	}
}
