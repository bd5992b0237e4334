package main

import (
	"strings"
	"testing"
	"time"
)

// An ended lease's end is not known (the store says only that it ended):
// list and state must not give the time they ran as when it ended.
func TestExpiredLeaseEnd(t *testing.T) {
	t.Parallel()
	f := single(t)
	claimed := time.Now()
	f.claim("crashed", "worker-9", 50*time.Millisecond, nil)
	time.Sleep(1500 * time.Millisecond)
	var page listReport
	f.idem("-json", "list", "-state", "expired-lease").want(t, exitOK).decode(t, &page)
	if len(page.Keys) != 1 {
		t.Fatalf("list: %+v", page)
	}
	if e := page.Keys[0].LeaseEndsAt; e != nil && e.After(claimed.Add(time.Second)) {
		t.Errorf("list -json: lease_ends_at %v, but the lease ended by %v", e, claimed.Add(50*time.Millisecond))
	}
	var rep keyReport
	f.idem("-json", "state", "crashed").want(t, exitOK).decode(t, &rep)
	if e := rep.LeaseEndsAt; e != nil && e.After(claimed.Add(time.Second)) {
		t.Errorf("state -json: lease_ends_at %v, but the lease ended by %v", e, claimed.Add(50*time.Millisecond))
	}
	for _, args := range [][]string{{"list"}, {"state", "crashed"}} {
		r := f.idem(args...).want(t, exitOK)
		if strings.Contains(r.out, time.Now().UTC().Format("2006-01-02T15:04:05")) {
			t.Errorf("%s gives the time it ran as the lease's end:\n%s", args, r.out)
		}
	}
}
