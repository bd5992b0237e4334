package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// The middleware in a chi router: chi's pooled route context, and the
// middleware applied twice on one route.

// With chi's Use, the route context (a pooled *chi.Context in the request's
// context) stays the handler's while it runs after its client left: the
// request does not return (and chi does not recycle it) before the handler.
func TestChiRouteContextKeptWhileHandlerRuns(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	mw := newMiddleware(t, httpidem.Options{Runtime: rt})
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

	leave(t, srv, "/orders/first", "k-first", func() { idemtest.Recv(t, started) })
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
}

// The middleware applied twice on a route (router-level Use and per-route)
// with one runtime: the inner one passes the request on.
func TestDoubleWrap(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{})
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
