package httpidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// With chi's Use, the route context (a pooled *chi.Context in the request's
// context) stays the handler's while it runs after its client left: the
// request does not return (and chi does not recycle it) before the handler.
func TestChiRouteContextKeptWhileHandlerRuns(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	mw, err := httpidem.New(httpidem.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate) }) }
	defer release()
	started := make(chan struct{}, 1)
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if chi.URLParam(r, "id") == "first" {
			started <- struct{}{}
			<-gate
		}
		io.WriteString(w, "id="+chi.URLParam(r, "id"))
	})
	srv := httptest.NewServer(r)
	defer srv.Close()

	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders/first", strings.NewReader("x"))
	req.Header.Set(httpidem.HeaderKey, "k-first")
	gone := make(chan reply, 1)
	go func() { gone <- send(srv, req) }()
	<-started
	cancel()
	<-gone // the client has left; its handler goes on
	// Other requests use chi's pooled route contexts meanwhile.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 25 {
				do(srv, http.MethodPost, fmt.Sprintf("/orders/o-%d-%d", i, j), fmt.Sprintf("k-%d-%d", i, j), "x")
			}
		})
	}
	wg.Wait()
	release()
	var got reply
	idemtest.Eventually(t, "the first run to be stored", func() bool {
		got = do(srv, http.MethodPost, "/orders/first", "k-first", "x")
		return got.err == nil && got.status == http.StatusOK
	})
	if got.body != "id=first" {
		t.Fatalf("the handler of /orders/first answered %q: it read another request's route context", got.body)
	}
	closeCtx, c2 := context.WithTimeout(bg, 5*time.Second)
	defer c2()
	_ = mw.Close(closeCtx)
}

// A handler that panics after its client left: the panic is logged, by the
// run itself.
func TestPanicAfterClientLeftIsLogged(t *testing.T) {
	var logs logBuffer
	rt := idemtest.Runtime(t, idem.Options{})
	gate := make(chan struct{})
	started := make(chan struct{}, 1)
	var panicking atomic.Bool
	panicking.Store(true)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panicking.Load() {
			started <- struct{}{}
			<-gate
			panic("card reader on fire after the client left")
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Logger: logs.logger()}, h)
	ctx, cancel := context.WithCancel(bg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/payments", strings.NewReader("x"))
	req.Header.Set(httpidem.HeaderKey, "k")
	gone := make(chan reply, 1)
	go func() { gone <- send(srv, req) }()
	<-started
	cancel()
	<-gone // the client has left; its handler goes on
	panicking.Store(false)
	close(gate)
	// Once the retry runs, the panicked run is over.
	idemtest.Eventually(t, "the retry to run", func() bool {
		r := do(srv, http.MethodPost, "/payments", "k", "x")
		return r.err == nil && r.status == http.StatusCreated
	})
	if out := logs.String(); !strings.Contains(out, "card reader on fire") {
		t.Fatalf("the panic was not logged:\n%q", out)
	}
}

// A waiter whose request context runs out (a timeout middleware) before the
// settle time gets 409, as docs/http.md says.
func TestWaiterContextDeadlineIs409(t *testing.T) {
	p := newPayments()
	mw, err := httpidem.New(httpidem.Options{Settle: 10 * time.Second, Logger: nil})
	if err != nil {
		t.Fatal(err)
	}
	inner := mw.Handler(p)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Timeout") != "" {
			ctx, cancel := context.WithTimeout(r.Context(), 100*time.Millisecond)
			defer cancel()
			r = r.WithContext(ctx)
		}
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		_ = mw.Close(ctx)
	}()
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "pay") }()
	p.WaitStarted(t)
	r := do(srv, http.MethodPost, "/payments", "k", "pay", "X-Timeout", "1")
	release()
	<-owner
	if r.err != nil || r.status != http.StatusConflict {
		t.Fatalf("waiter whose context ran out: %d %q, want 409", r.status, r.body)
	}
}

// A header value that is not UTF-8 (obs-text, e.g. a Latin-1 filename)
// survives a replay from the store.
func TestNonUTF8HeaderFromStore(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	rt1 := idemtest.Runtime(t, idem.Options{Store: mem})
	rt2 := idemtest.Runtime(t, idem.Options{Store: mem, DisableCache: true})
	const cd = "attachment; filename=\"caf\xe9.txt\""
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Disposition", cd)
		w.WriteHeader(http.StatusCreated)
	})
	srv1, _ := serve(t, httpidem.Options{Runtime: rt1}, h)
	srv2, _ := serve(t, httpidem.Options{Runtime: rt2}, h)
	first := post(t, srv1, "k", "x")
	if got := first.header.Get("Content-Disposition"); got != cd {
		t.Fatalf("first: %q", got)
	}
	again := post(t, srv2, "k", "x")
	expect(t, "replay from the store", again, http.StatusCreated, true, "")
	if got := again.header.Get("Content-Disposition"); got != cd {
		t.Fatalf("replayed Content-Disposition %q, want %q", got, cd)
	}
}

// Headers that an outer middleware set on the writer are added to by the
// handler, not replaced: Vary: Origin from a CORS middleware stays when the
// handler adds Vary: Accept-Encoding.
func TestOuterHeadersAddedTo(t *testing.T) {
	mw, err := httpidem.New(httpidem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		_ = mw.Close(ctx)
	}()
	inner := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		w.WriteHeader(http.StatusCreated)
	}))
	cors := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(cors)
	defer srv.Close()
	r := do(srv, http.MethodPost, "/x", "k", "x")
	if got := strings.Join(r.header.Values("Vary"), ","); got != "Origin,Accept-Encoding" {
		t.Fatalf("Vary %q, want Origin,Accept-Encoding (as without the middleware)", got)
	}
}

// The middleware applied twice on a route (router-level Use and per-route)
// with one runtime: the inner one passes the request on.
func TestDoubleWrap(t *testing.T) {
	mw, err := httpidem.New(httpidem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		_ = mw.Close(ctx)
	}()
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.With(mw.Handler).Post("/x", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	srv := httptest.NewServer(r)
	defer srv.Close()
	got := do(srv, http.MethodPost, "/x", "k", "x")
	if got.status != http.StatusCreated {
		t.Fatalf("double-wrapped route: %d %q", got.status, got.body)
	}
}
