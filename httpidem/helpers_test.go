package httpidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

var bg = context.Background()

// discard drops what the middleware logs.
var discard = slog.New(slog.DiscardHandler)

// newMiddleware returns a middleware that the test closes at its end,
// after the servers it started.
func newMiddleware(t testing.TB, opts httpidem.Options) *httpidem.Middleware {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard
	}
	mw, err := httpidem.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, idemtest.Timeout)
		defer cancel()
		if err := mw.Close(ctx); err != nil {
			t.Errorf("middleware Close: %v", err)
		}
	})
	return mw
}

// serve starts a loopback HTTP server: a ServeMux with h behind the
// middleware on every path. The server, then the middleware, are closed at
// the end of the test.
func serve(t testing.TB, opts httpidem.Options, h http.Handler) (*httptest.Server, *httpidem.Middleware) {
	t.Helper()
	mw := newMiddleware(t, opts)
	mux := http.NewServeMux()
	mux.Handle("/", mw.Handler(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, mw
}

// reply is a response as the client saw it.
type reply struct {
	status   int
	header   http.Header
	body     string
	replayed bool
	err      error
}

// call sends one request; key "" sends no Idempotency-Key header.
func call(t testing.TB, srv *httptest.Server, method, path, key, body string, hdr ...string) reply {
	t.Helper()
	return do(srv, method, path, key, body, hdr...)
}

func do(srv *httptest.Server, method, path, key, body string, hdr ...string) reply {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	if key != "" {
		req.Header.Set(httpidem.HeaderKey, key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return send(srv, req)
}

func send(srv *httptest.Server, req *http.Request) reply {
	resp, err := srv.Client().Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{
		status:   resp.StatusCode,
		header:   resp.Header,
		body:     string(b),
		replayed: resp.Header.Get(httpidem.HeaderReplayed) == "true",
		err:      err,
	}
}

// leave sends a POST of "x" to path with key and cancels it once
// handlerRunning has returned: the client leaves while its handler goes on.
// It returns what the client got.
func leave(t testing.TB, srv *httptest.Server, path, key string, handlerRunning func()) reply {
	t.Helper()
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpidem.HeaderKey, key)
	gone := make(chan reply, 1)
	go func() { gone <- send(srv, req) }()
	handlerRunning()
	cancel()
	return idemtest.Recv(t, gone)
}

func post(t testing.TB, srv *httptest.Server, key, body string, hdr ...string) reply {
	t.Helper()
	r := call(t, srv, http.MethodPost, "/payments", key, body, hdr...)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r
}

// expect checks a reply's status and replay mark; body "" is not checked.
func expect(t testing.TB, what string, r reply, status int, replayed bool, body string) {
	t.Helper()
	switch {
	case r.err != nil:
		t.Fatalf("%s: %v", what, r.err)
	case r.status != status || r.replayed != replayed:
		t.Fatalf("%s: status %d replayed %v (body %q); want %d replayed %v", what, r.status, r.replayed, r.body, status, replayed)
	case body != "" && r.body != body:
		t.Fatalf("%s: body %q, want %q", what, r.body, body)
	}
}

// expectProblem checks an error response of the middleware.
func expectProblem(t testing.TB, what string, r reply, status int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	var p struct {
		Status int
		Title  string
		Detail string
	}
	if r.status != status || r.header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal([]byte(r.body), &p) != nil || p.Status != status || p.Detail == "" || r.replayed {
		t.Fatalf("%s: %d %v %q; want a %d problem", what, r.status, r.header, r.body, status)
	}
}

// payments is a handler that counts its runs and answers with status and a
// body naming the run and echoing the request body. While held, each run
// announces itself on Started and waits (see idemtest.Checkpoint).
type payments struct {
	*idemtest.Checkpoint
	runs   atomic.Int32
	mu     sync.Mutex
	status []int // statuses of the next runs (then 201)
}

func newPayments() *payments { return &payments{Checkpoint: idemtest.NewCheckpoint()} }

func (p *payments) next(statuses ...int) {
	p.mu.Lock()
	p.status = append(p.status, statuses...)
	p.mu.Unlock()
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	status := http.StatusCreated
	if len(p.status) > 0 {
		status, p.status = p.status[0], p.status[1:]
	}
	p.mu.Unlock()
	p.Pass()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/"+strconv.Itoa(int(n)))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"run": n, "status": status, "body": string(body)})
}

// logBuffer collects a logger's output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// downable is a store that can be made to fail every operation, to show that
// an answer came from the runtime's cache and not from the store.
type downable struct {
	store.Store
	down atomic.Bool
}

var errDown = errors.New("test: store down")

func (d *downable) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	if d.down.Load() {
		return store.ClaimResult{}, errDown
	}
	return d.Store.Claim(ctx, key, req)
}

func (d *downable) Get(ctx context.Context, key string) (store.Record, error) {
	if d.down.Load() {
		return store.Record{}, errDown
	}
	return d.Store.Get(ctx, key)
}
