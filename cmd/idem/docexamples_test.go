package main

import (
	"strings"
	"testing"
)

// The examples of docs/operations.md "Admin command", on each store, with
// the records they show.
func TestDocExamples(t *testing.T) {
	eachStore(t, func(t *testing.T, sc storeCase) {
		for _, ex := range []struct {
			args string
			code int
			want string
		}{
			{"-namespace tenant-a -version v1 get order-1", exitOK, "receipt"},
			{"-namespace tenant-a -version v1 state running", exitOK, "state        in-progress\n"},
			{"-namespace tenant-a -version v1 state declined", exitOK, "error detail card declined\n"},
			{"-namespace tenant-a -version v1 clear -dry-run", exitOK, "would delete ff:idemp:tenant-a:v1:order-1\n"},
			{"-namespace tenant-a -all-versions stats", exitOK, "in progress  2 (lease ended: 1)\n"},
			{"-namespace tenant-a stats -all-versions", exitOK, "in progress  2 (lease ended: 1)\n"},
			{"-namespace tenant-a -version v1 forget -dry-run order-1", exitOK, "would forget ff:idemp:tenant-a:v1:order-1 (completed); pass no -dry-run to forget it\n"},
			{"-namespace tenant-a -version v1 list -limit 3", exitOK, ""},
			{"-namespace tenant-a -version v1 list -state expired-lease -json", exitOK, `"state": "expired-lease"`},
			{"-namespace acme -version http get pay-1", exitOK, "HTTP response 201 Created\n"},
			{"state consume:ORDERS/billing:order-7", exitOK, "consumer     stream/topic ORDERS, consumer/group billing, message key order-7\n"},
			{"-key-prefix consume:ORDERS/ list -state completed", exitOK, "consume:ORDERS/billing:order-7  (stream/topic ORDERS, consumer/group billing"},
			{"-namespace tenant-a -version v1 forget order-1", exitOK, "forgot ff:idemp:tenant-a:v1:order-1 (completed)\n"},
			{"-namespace tenant-a -version v1 clear -yes", exitOK, "skipped ff:idemp:tenant-a:v1:crashed: in progress (owner worker-9, lease left 0s)\n"},
		} {
			r := sc.idem(t, strings.Fields(ex.args)...)
			if r.code != ex.code || !strings.Contains(r.out, ex.want) {
				t.Errorf("idem %s: exit %d, want %d and %q in\n%s\nstderr: %s", ex.args, r.code, ex.code, ex.want, r.out, r.err)
			}
		}
		if sc.name == "redis" {
			r := sc.idem(t, "state", "session:1", "-redis-key").want(t, exitNoRecord)
			if !strings.Contains(r.err, `idem: Redis key "session:1" is not an idem record: idem's records are named st:v3{<key>} (see -store-prefix)`) {
				t.Errorf("state -redis-key: %s", r.err)
			}
		}
	})
}
