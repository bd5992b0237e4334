package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// envMain makes the test binary run main, as the command would: the tests
// that check exit codes and output of the real program re-execute it.
const envMain = "IDEM_CMD_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// result is one run of the command.
type result struct {
	out, err string
	code     int
}

// idem runs the command line args in process.
func idem(t testing.TB, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(bg, args, &out, &errb)
	return result{out: out.String(), err: errb.String(), code: code}
}

// want fails the test unless r ended with code.
func (r result) want(t testing.TB, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.out, r.err)
	}
	return r
}

// decode parses r's JSON output into v.
func (r result) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.out), v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, r.out)
	}
}

var prefixSeq atomic.Int64

// fixture is a store on a Redis deployment, with the flags that make the
// command use the same deployment and store prefix.
type fixture struct {
	t     testing.TB
	c     redis.UniversalClient
	s     *redisstore.Store
	flags []string
}

func newFixture(t testing.TB, c redis.UniversalClient, conn ...string) *fixture {
	prefix := fmt.Sprintf("c%d:", prefixSeq.Add(1))
	s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{t: t, c: c, s: s, flags: append(conn, "-store-prefix", prefix)}
}

func single(t testing.TB) *fixture {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	return newFixture(t, c, "-redis", "redis://"+srv.Addr+"/0")
}

// idem runs the command on the fixture's store.
func (f *fixture) idem(args ...string) result {
	f.t.Helper()
	return idem(f.t, append(append([]string(nil), f.flags...), args...)...)
}

var scopeA = store.Scope{Namespace: "tenant-a", Version: "v1"}

// claim claims key (as the store holds it) for owner.
func (f *fixture) claim(key, owner string, lease time.Duration, fp []byte) store.Token {
	f.t.Helper()
	res, err := f.s.Claim(bg, key, store.ClaimRequest{Owner: owner, Lease: lease, TTL: time.Hour, Fingerprint: fp})
	if err != nil || res.Status != store.Claimed {
		f.t.Fatalf("claim %q: %v %v", key, res.Status, err)
	}
	return res.Token
}

// done stores rec as key's result, for ttl.
func (f *fixture) done(key string, rec store.Record, ttl time.Duration) {
	f.t.Helper()
	tok := f.claim(key, "writer", time.Minute, rec.Fingerprint)
	if _, err := f.s.Complete(bg, key, tok, rec, ttl); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) state(key string) store.State {
	f.t.Helper()
	e, err := f.s.Inspect(bg, key)
	if err != nil {
		f.t.Fatal(err)
	}
	return e.State
}

// The real program: exit codes and streams, through main.
func TestProgram(t *testing.T) {
	f := single(t)
	f.done(store.BuildKey("order-1", scopeA), store.Record{Value: []byte(`{"id":"r-1"}`)}, time.Hour)
	exe := func(args ...string) result {
		cmd := exec.Command(os.Args[0], append(append([]string(nil), f.flags...), args...)...)
		cmd.Env = append(os.Environ(), envMain+"=1")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out: out.String(), err: errb.String(), code: code}
	}
	r := exe("-namespace", "tenant-a", "-version", "v1", "get", "order-1").want(t, exitOK)
	if r.out != "{\"id\":\"r-1\"}\n" || r.err != "" {
		t.Errorf("get: stdout %q, stderr %q", r.out, r.err)
	}
	r = exe("get", "nothing").want(t, exitNoRecord)
	if r.out != "" || !strings.Contains(r.err, `no idem record for key "nothing"`) {
		t.Errorf("get of an absent key: stdout %q, stderr %q", r.out, r.err)
	}
	exe("clear").want(t, exitUsage)
	if r := exe("-h"); r.code != exitOK || !strings.Contains(r.out, "Usage:") {
		t.Errorf("-h: %+v", r)
	}
}
