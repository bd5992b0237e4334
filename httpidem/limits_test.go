package httpidem_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// serverChildEnv makes the test binary a server with MaxRequestBody set to
// "no limit", listening on the address it holds.
const serverChildEnv = "HTTPIDEM_TEST_SERVER"

func serverChild(addr string) int {
	mw, err := httpidem.New(httpidem.Options{MaxRequestBody: math.MaxInt64, SharedScope: true, BodyTimeout: time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "got %d bytes", len(b))
	}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening", l.Addr())
	_ = http.Serve(l, h)
	return 0
}

// rawRequest sends a POST announcing length bytes and sending body, and
// returns the status line of the answer (or the error).
func rawRequest(addr string, length int64, body string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nIdempotency-Key: k-%d\r\nContent-Length: %d\r\n\r\n%s", length, length, body)
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}

// A request announcing 1 TiB with "no limit" set is refused at the ceiling,
// in a server of its own process, which lives on (it used to grow its
// buffer to the announced length and die of it).
func TestAnnouncedTerabyteIsRefused(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverChildEnv+"=127.0.0.1:0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	addr := strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	status, err := rawRequest(addr, 1<<40, "0123456789")
	if err != nil || !strings.Contains(status, "413") {
		t.Fatalf("1 TiB announced: %q, %v; want 413", status, err)
	}
	// Under the ceiling but far over what is sent: read as it comes, and
	// cut off at the body's deadline.
	status, err = rawRequest(addr, 100<<20, "0123456789")
	if err != nil || !strings.Contains(status, "400") {
		t.Fatalf("100 MiB announced, 10 bytes sent: %q, %v; want 400", status, err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the server died: %v", err)
	default:
	}
	if status, err := rawRequest(addr, 5, "hello"); err != nil || !strings.Contains(status, "200") {
		t.Fatalf("a normal request after them: %q, %v", status, err)
	}
}

// Stalled uploads hold what they sent, not what they announced, and are
// cut off at BodyTimeout.
func TestStalledUploadsHoldWhatTheySent(t *testing.T) {
	srv, mw := serve(t, httpidem.Options{SharedScope: true, MaxRequestBody: 64 << 20, BodyTimeout: 2 * time.Second},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler ran") }))
	addr := strings.TrimPrefix(srv.URL, "http://")
	const n = 50
	var wg sync.WaitGroup
	statuses := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = rawRequest(addr, 64<<20, "x")
		}()
	}
	idemtest.Eventually(t, "the uploads to be read", func() bool {
		st := mw.BodyStats()
		return st.Reading == n && st.Buffered == n
	})
	wg.Wait() // each is cut off at its deadline
	for i, s := range statuses {
		if !strings.Contains(s, "400") {
			t.Fatalf("stalled upload %d answered %q, want 400", i, s)
		}
	}
	if st := mw.BodyStats(); st.Reading != 0 || st.Buffered != 0 {
		t.Fatalf("after the deadline: %+v, want nothing held", st)
	}
}

func TestVersionIsChecked(t *testing.T) {
	for _, v := range []string{"v\x00", strings.Repeat("v", 2000), "a\nb"} {
		if _, err := httpidem.New(httpidem.Options{Version: v}); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Version %q: err = %v, want ErrInvalidArgument", v[:min(len(v), 10)], err)
		}
	}
	if _, err := httpidem.New(httpidem.Options{BodyTimeout: -time.Second}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("negative BodyTimeout: %v", err)
	}
	mw, err := httpidem.New(httpidem.Options{Version: "payments-v2"})
	if err != nil {
		t.Fatal(err)
	}
	_ = mw.Close(context.Background())
}

// What Tenant returns is checked on every request: a scope over
// MaxTenantLen or with a control character is the service's
// misconfiguration, answered 500 (ErrInvalidScope), and the handler does
// not run; the longest allowed scope works with the longest key.
func TestTenantIsChecked(t *testing.T) {
	var runs atomic.Int32
	var gotErr error
	tenants := map[string]string{
		"600 bytes": strings.Repeat("t", 600),
		"NUL":       "acct\x00",
		"tab":       "acct\t7",
		"DEL":       "acct\x7f",
		"longest":   strings.Repeat("t", httpidem.MaxTenantLen),
	}
	srv, _ := serve(t, httpidem.Options{
		Tenant: func(r *http.Request) string { return tenants[r.Header.Get("X-Case")] },
		OnError: func(w http.ResponseWriter, r *http.Request, status int, err error) {
			gotErr = err
			w.WriteHeader(status)
		},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	for _, name := range []string{"600 bytes", "NUL", "tab", "DEL"} {
		gotErr = nil
		r := post(t, srv, "k", "x", "X-Case", name)
		if r.status != http.StatusInternalServerError || !errors.Is(gotErr, httpidem.ErrInvalidScope) {
			t.Errorf("tenant %s: %d, %v; want 500 with ErrInvalidScope", name, r.status, gotErr)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("the handler ran %d times for invalid scopes", runs.Load())
	}
	if r := post(t, srv, strings.Repeat("k", httpidem.MaxKeyLen), "x", "X-Case", "longest"); r.status != http.StatusCreated {
		t.Fatalf("the longest tenant and key: %d, want 201", r.status)
	}
}

// Every duration of the options is refused at New when negative or over
// store.MaxDuration (math.MaxInt64 included).
func TestOptionDurationBounds(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, -time.Second} {
		for name, o := range map[string]httpidem.Options{
			"Settle":      {Policy: idem.Policy{Settle: d}},
			"Lease":       {Policy: idem.Policy{Lease: d}},
			"TTL":         {Policy: idem.Policy{TTL: d}},
			"BodyTimeout": {BodyTimeout: d},
		} {
			if mw, err := httpidem.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
				if mw != nil {
					_ = mw.Close(context.Background())
				}
				t.Errorf("%s %v: %v, want ErrInvalidArgument", name, d, err)
			}
		}
	}
}

// A runtime whose MaxResultBytes is small (32 KiB here; any value under
// the 64 KiB kept for the status and headers) still stores the responses
// that fit in it: the default MaxStoredBody gives way to it, but never to
// nothing, which would release every response with a body and run its
// handler again on each retry; a MaxStoredBody that fits is accepted.
func TestStoredBodyUnderASmallResultLimit(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{MaxResultBytes: 32 << 10})
	if _, err := httpidem.New(httpidem.Options{Runtime: rt, MaxStoredBody: 16 << 10}); err != nil {
		t.Fatalf("MaxStoredBody 16 KiB under a 32 KiB result limit: %v", err)
	}
	if _, err := httpidem.New(httpidem.Options{Runtime: rt, MaxStoredBody: 32 << 10}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("MaxStoredBody at the result limit itself: %v, want ErrInvalidArgument", err)
	}
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{Runtime: rt}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"p-1"}`)
	}))
	for i := range 2 {
		if r := post(t, srv, "k", "x"); r.status != http.StatusCreated || r.body != `{"id":"p-1"}` {
			t.Fatalf("request %d: %d %q", i, r.status, r.body)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once: the response was not stored", n)
	}
}

// The 500 of a Tenant that returns a bad scope names the request's key,
// as every answer to a keyed request does (the problems included), and as
// the 500 of a scope that makes the key invalid did before Tenant was
// checked on its own.
func TestBadTenantAnswerNamesItsKey(t *testing.T) {
	for name, tenant := range map[string]string{"600 bytes": strings.Repeat("t", 600), "NUL": "acct\x00", "2 KiB": strings.Repeat("t", 2048)} {
		srv, _ := serve(t, httpidem.Options{Tenant: func(*http.Request) string { return tenant }},
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
		r := post(t, srv, "k-7", "x")
		if r.status != http.StatusInternalServerError || r.header.Get(httpidem.HeaderKey) != "k-7" {
			t.Errorf("tenant %s: %d with %s %q, want 500 naming key k-7", name, r.status, httpidem.HeaderKey, r.header.Get(httpidem.HeaderKey))
		}
	}
}

// A response whose headers take more than the room kept for them, with a
// body under MaxStoredBody, is over the runtime's result limit as a whole:
// it is sent and released, as a body over MaxStoredBody is, not stored as
// a permanent "result too large" that every retry gets as a 500.
func TestLargeHeadersAreReleasedNotStoredAsAnError(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{MaxResultBytes: 256 << 10})
	var runs atomic.Int32
	body := strings.Repeat("b", 160<<10) // under MaxStoredBody (192 KiB)
	srv, _ := serve(t, httpidem.Options{Runtime: rt}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("X-Trace", strings.Repeat("h", 100<<10))
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	}))
	for i := range 2 {
		if r := post(t, srv, "k", "x"); r.status != http.StatusCreated || len(r.body) != len(body) {
			t.Fatalf("request %d: %d with %d bytes, want 201 with the body", i, r.status, len(r.body))
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times, want 2 (released, not stored)", n)
	}
}
