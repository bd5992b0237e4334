package main

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// get and state of a key in each state, by its scoped form, its raw form
// and its Redis key name; -json output parsed.
func TestGetAndState(t *testing.T) {
	t.Parallel()
	f := single(t)
	scoped := func(k string) string { return store.BuildKey(k, scopeA) }
	fp := []byte{0xde, 0xad, 0xbe, 0xef}
	f.done(scoped("text"), store.Record{Value: []byte(`{"id":"r-1"}`), Fingerprint: fp}, time.Hour)
	binary := []byte{0, 1, 0xff, 'x'}
	f.done(scoped("binary"), store.Record{Value: binary}, time.Hour)
	f.done(scoped("failed"), store.Record{Failed: true, Error: "card declined"}, time.Hour)
	holder := f.claim(scoped("held"), "instance-1:7", time.Minute, fp)
	a := []string{"-namespace", "tenant-a", "-version", "v1"}
	with := func(args ...string) []string { return append(append([]string(nil), a...), args...) }

	// get
	for _, args := range [][]string{with("get", "text"), {"get", scoped("text")}, {"get", "-redis-key", f.s.RecordKey(scoped("text"))}} {
		if r := f.idem(args...).want(t, exitOK); r.out != "{\"id\":\"r-1\"}\n" {
			t.Errorf("%q: %q", args, r.out)
		}
	}
	var rep keyReport
	f.idem(with("-json", "get", "text")...).want(t, exitOK).decode(t, &rep)
	if rep.Value == nil || *rep.Value != `{"id":"r-1"}` || rep.State != "completed" || rep.Key != scoped("text") {
		t.Errorf("get -json of a text value: %+v", rep)
	}
	r := f.idem(with("get", "binary")...).want(t, exitOK)
	if got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(r.out)); err != nil || !bytes.Equal(got, binary) {
		t.Errorf("get of a binary value: %q (%v)", r.out, err)
	}
	if !strings.Contains(r.err, "not printable UTF-8") {
		t.Errorf("get of a binary value says nothing of base64: %q", r.err)
	}
	rep = keyReport{}
	f.idem(with("get", "binary", "-json")...).want(t, exitOK).decode(t, &rep)
	if rep.Value != nil || rep.ValueBase64 == nil || *rep.ValueBase64 != base64.StdEncoding.EncodeToString(binary) {
		t.Errorf("get -json of a binary value: %+v", rep)
	}
	if r := f.idem(with("get", "failed")...).want(t, exitOK); r.out != "permanent error: card declined\n" {
		t.Errorf("get of a permanent error: %q", r.out)
	}
	r = f.idem(with("get", "held")...).want(t, exitInProgress)
	if !strings.Contains(r.err, "in progress") || !strings.Contains(r.err, "instance-1:7") {
		t.Errorf("get of a key in progress: %q", r.err)
	}
	r = f.idem(with("get", "absent")...).want(t, exitNoRecord)
	if !strings.Contains(r.err, "no idem record") {
		t.Errorf("get of an absent key: %q", r.err)
	}

	// state
	rep = keyReport{}
	f.idem(with("state", "held", "-json")...).want(t, exitOK).decode(t, &rep)
	if rep.State != "in-progress" || rep.Owner != "instance-1:7" || rep.Fence != holder.Fence || rep.Fingerprint != "deadbeef" ||
		rep.LeaseLeftMs == nil || *rep.LeaseLeftMs <= 0 || *rep.LeaseLeftMs > time.Minute.Milliseconds() || rep.LeaseEndsAt == nil {
		t.Errorf("state -json of a key in progress: %+v", rep)
	}
	rep = keyReport{}
	f.idem(with("state", "text", "-json")...).want(t, exitOK).decode(t, &rep)
	if rep.State != "completed" || rep.Fingerprint != "deadbeef" || rep.ValueBytes == nil || *rep.ValueBytes != 12 ||
		rep.Value != nil || rep.CreatedAt == nil || rep.ExpiresAt == nil || rep.ExpiresAt.Sub(*rep.CreatedAt) != time.Hour ||
		rep.TTLLeftMs == nil || *rep.TTLLeftMs > time.Hour.Milliseconds() {
		t.Errorf("state -json of a completed key: %+v", rep)
	}
	rep = keyReport{}
	f.idem(with("-json", "state", "failed")...).want(t, exitOK).decode(t, &rep)
	if rep.State != "failed" || rep.Error != "card declined" || rep.ValueBytes != nil {
		t.Errorf("state -json of a failed key: %+v", rep)
	}
	rep = keyReport{}
	f.idem(with("-json", "state", "absent")...).want(t, exitOK).decode(t, &rep)
	if rep.State != "absent" || rep.RedisKey != f.s.RecordKey(scoped("absent")) {
		t.Errorf("state -json of an absent key: %+v", rep)
	}
	r = f.idem(with("state", "held")...).want(t, exitOK)
	for _, want := range []string{"in-progress", "instance-1:7", "lease left", "deadbeef"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("state of a key in progress lacks %q:\n%s", want, r.out)
		}
	}
	r = f.idem(with("state", "text")...).want(t, exitOK)
	for _, want := range []string{"completed", "created", "expires", "12 B"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("state of a completed key lacks %q:\n%s", want, r.out)
		}
	}
}

// forget deletes a result, refuses a key in progress and reports an
// absent key.
func TestForget(t *testing.T) {
	t.Parallel()
	f := single(t)
	f.done("done", store.Record{Value: []byte("v")}, time.Hour)
	tok := f.claim("held", "owner-1", time.Minute, nil)
	if r := f.idem("forget", "done").want(t, exitOK); !strings.Contains(r.out, "forgot done") {
		t.Errorf("forget: %q", r.out)
	}
	if st := f.state("done"); st != store.Absent {
		t.Errorf("after forget: %v", st)
	}
	r := f.idem("forget", "held").want(t, exitInProgress)
	if !strings.Contains(r.err, "not forgotten") {
		t.Errorf("forget of a key in progress: %q", r.err)
	}
	if _, err := f.s.Complete(bg, "held", tok, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatalf("the owner could not complete after the refused forget: %v", err)
	}
	f.idem("forget", "done").want(t, exitNoRecord)
	var rep keyReport
	f.idem("forget", "-json", "held").want(t, exitOK).decode(t, &rep)
	if !rep.Forgotten || rep.State != "completed" {
		t.Errorf("forget -json: %+v", rep)
	}
}

// A Redis key that is not idem's is named so, and left as it is.
func TestForeignKeys(t *testing.T) {
	t.Parallel()
	f := single(t)
	rk := f.s.RecordKey("session")
	if err := f.c.Set(bg, rk, "not ours", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := f.c.HSet(bg, f.s.RecordKey("hash"), "user", "42").Err(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"get", "session"}, {"state", "session"}, {"forget", "session"}, {"get", "-redis-key", rk}, {"forget", "hash"}} {
		r := f.idem(args...).want(t, exitNoRecord)
		if !strings.Contains(r.err, "is not an idem record") {
			t.Errorf("%q: %q", args, r.err)
		}
	}
	r := f.idem("state", "-redis-key", "session:1").want(t, exitNoRecord)
	if !strings.Contains(r.err, `Redis key "session:1" is not an idem record`) {
		t.Errorf("state of a Redis key named unlike a record: %q", r.err)
	}
	if v, err := f.c.Get(bg, rk).Result(); err != nil || v != "not ours" {
		t.Errorf("the foreign key changed: %q %v", v, err)
	}
	if n, err := f.c.Exists(bg, f.s.RecordKey("hash")).Result(); err != nil || n != 1 {
		t.Errorf("the foreign hash is gone: %d %v", n, err)
	}
}

// JSON strings hold UTF-8 only: a key that is not valid UTF-8 would come out
// with its bad bytes replaced by U+FFFD, naming no record. -json gives such
// a key (and its Redis key) in base64 too, wherever it names one.
func TestJSONKeyNotUTF8(t *testing.T) {
	t.Parallel()
	f := single(t)
	const bad, held, foreign = "order-\xff", "held-\xfe", "other-\xfd"
	f.done(bad, store.Record{Value: []byte("v")}, time.Hour)
	f.claim(held, "owner-1", time.Minute, nil)
	if err := f.c.Set(bg, f.s.RecordKey(foreign), "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	f.done("order-ok", store.Record{Value: []byte("v")}, time.Hour)
	b64 := base64.StdEncoding.EncodeToString

	var rep keyReport
	f.idem("-json", "state", "--", bad).want(t, exitOK).decode(t, &rep)
	if rep.KeyBase64 != b64([]byte(bad)) || rep.RedisKeyBase64 != b64([]byte(f.s.RecordKey(bad))) {
		t.Errorf("state -json of %q: key_base64 %q, redis_key_base64 %q", bad, rep.KeyBase64, rep.RedisKeyBase64)
	}
	rep = keyReport{}
	f.idem("-json", "state", "order-ok").want(t, exitOK).decode(t, &rep)
	if rep.KeyBase64 != "" || rep.RedisKeyBase64 != "" {
		t.Errorf("state -json of a UTF-8 key: key_base64 %q, redis_key_base64 %q; want none", rep.KeyBase64, rep.RedisKeyBase64)
	}

	var cl clearReport
	f.idem("-json", "clear", "-dry-run").want(t, exitOK).decode(t, &cl)
	if !slices.Equal(cl.Keys, []string{"order-ok"}) || !slices.Equal(cl.KeysBase64, []string{b64([]byte(bad))}) || cl.Deleted != 2 {
		t.Errorf("clear -json: keys %q, keys_base64 %q, deleted %d; want [order-ok], [%s], 2", cl.Keys, cl.KeysBase64, cl.Deleted, b64([]byte(bad)))
	}
	if len(cl.Skipped) != 1 || cl.Skipped[0].KeyBase64 != b64([]byte(held)) {
		t.Errorf("clear -json: skipped %+v, want %q with its key in base64", cl.Skipped, held)
	}
	if len(cl.NotIdem) != 1 || cl.NotIdem[0].KeyBase64 != b64([]byte(foreign)) || cl.NotIdem[0].RedisKeyBase64 != b64([]byte(f.s.RecordKey(foreign))) {
		t.Errorf("clear -json: not idem's %+v, want %q with its keys in base64", cl.NotIdem, foreign)
	}
}
