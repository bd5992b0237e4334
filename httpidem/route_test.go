package httpidem_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemrt/idem/httpidem"
)

// A router's own 404 or 405, for a request that matched no route, is not a
// result: it is never stored, even where StoreStatus would store 404 and
// 405, so the corrected request with the same key runs.

// storeAll stores every status below 500, 404 and 405 included: with it, a
// 404 that is not stored was recognised as a route miss.
func storeAll(status int) bool { return status < 500 }

var policies = []struct {
	name        string
	storeStatus func(int) bool
}{{"default policy", nil}, {"storing 404 and 405", storeAll}}

// The case: the middleware around a whole ServeMux; a POST to a
// mistyped path gets the mux's 404; the corrected request with the same key
// runs (not 422).
func TestRouteMissIsNotStored(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol.name, func(t *testing.T) {
			p := newPayments()
			mw := newMiddleware(t, httpidem.Options{StoreStatus: pol.storeStatus})
			mux := http.NewServeMux()
			mux.Handle("POST /payments", p)
			srv := httptest.NewServer(mw.Handler(mux))
			defer srv.Close()
			expect(t, "mistyped path", call(t, srv, http.MethodPost, "/paymnts", "k", "pay 10"), http.StatusNotFound, false, "")
			expect(t, "mistyped again", call(t, srv, http.MethodPost, "/paymnts", "k", "pay 10"), http.StatusNotFound, false, "")
			first := post(t, srv, "k", "pay 10")
			expect(t, "corrected", first, http.StatusCreated, false, "")
			expect(t, "retried", post(t, srv, "k", "pay 10"), http.StatusCreated, true, first.body)
			if p.runs.Load() != 1 {
				t.Fatalf("%d runs, want 1", p.runs.Load())
			}
		})
	}
}

// The mux's 405 (a route for the path, not for the method) is a route miss
// too.
func TestMethodMissIsNotStored(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol.name, func(t *testing.T) {
			p := newPayments()
			mw := newMiddleware(t, httpidem.Options{StoreStatus: pol.storeStatus})
			mux := http.NewServeMux()
			mux.Handle("POST /payments", p)
			srv := httptest.NewServer(mw.Handler(mux))
			defer srv.Close()
			r := call(t, srv, http.MethodPatch, "/payments", "k", "pay 10")
			expect(t, "wrong method", r, http.StatusMethodNotAllowed, false, "")
			if r.header.Get("Allow") == "" {
				t.Fatalf("the mux's 405 lost its Allow header: %v", r.header)
			}
			expect(t, "corrected", post(t, srv, "k", "pay 10"), http.StatusCreated, false, "")
		})
	}
}

// A 404 from a handler a route matched is the handler's answer: with a
// policy that stores 404, it is stored. The route's pattern tells it apart.
func TestHandler404IsStoredWhenStoreStatusSaysSo(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{StoreStatus: storeAll})
	p := newPayments()
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/cancel", mw.Handler(p)) // per route, as recommended
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p.next(http.StatusNotFound)
	first := call(t, srv, http.MethodPost, "/orders/9/cancel", "k", "x")
	expect(t, "no such order", first, http.StatusNotFound, false, "")
	expect(t, "retried", call(t, srv, http.MethodPost, "/orders/9/cancel", "k", "x"), http.StatusNotFound, true, first.body)
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", p.runs.Load())
	}
}

// A ServeMux inside the middleware, itself under a catch-all route of an
// outer mux: the inner mux clears the Pattern the outer one set when it
// finds no route, so its miss is recognised.
func TestNestedMuxRouteMissIsNotStored(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{StoreStatus: storeAll})
	p := newPayments()
	inner := http.NewServeMux()
	inner.Handle("POST /payments", p)
	outer := http.NewServeMux()
	outer.Handle("/", mw.Handler(inner))
	srv := httptest.NewServer(outer)
	defer srv.Close()
	expect(t, "mistyped path", call(t, srv, http.MethodPost, "/paymnts", "k", "x"), http.StatusNotFound, false, "")
	expect(t, "corrected", post(t, srv, "k", "x"), http.StatusCreated, false, "")
}

// With chi's Use, the middleware runs before chi routes, on the request chi
// then routes: chi's 404 and 405 are recognised; a handler's own 404 on a
// matched route is the handler's answer.
func TestChiRouteMissIsNotStored(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{StoreStatus: storeAll})
	p := newPayments()
	r := chi.NewRouter()
	r.Use(mw.Handler)
	r.Method(http.MethodPost, "/payments", p)
	r.Method(http.MethodPost, "/orders/{id}/cancel", p)
	srv := httptest.NewServer(r)
	defer srv.Close()
	expect(t, "mistyped path", call(t, srv, http.MethodPost, "/paymnts", "k", "x"), http.StatusNotFound, false, "")
	expect(t, "wrong method", call(t, srv, http.MethodPatch, "/payments", "k", "x"), http.StatusMethodNotAllowed, false, "")
	first := post(t, srv, "k", "x")
	expect(t, "corrected", first, http.StatusCreated, false, "")
	expect(t, "retried", post(t, srv, "k", "x"), http.StatusCreated, true, first.body)

	p.next(http.StatusNotFound)
	gone := call(t, srv, http.MethodPost, "/orders/9/cancel", "k2", "x")
	expect(t, "no such order", gone, http.StatusNotFound, false, "")
	expect(t, "stored", call(t, srv, http.MethodPost, "/orders/9/cancel", "k2", "x"), http.StatusNotFound, true, gone.body)
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}

// chi wrapped from outside (mw.Handler(router)) routes a copy of the
// request, whose Pattern the middleware cannot see: every 404 and 405 then
// counts as a route miss and is never stored, the handler's own included,
// as docs/http.md says. Other responses are stored as usual.
func TestChiWrappedFromOutsideNeverStores404(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{StoreStatus: storeAll})
	p := newPayments()
	r := chi.NewRouter()
	r.Method(http.MethodPost, "/payments", p)
	r.Method(http.MethodPost, "/orders/{id}/cancel", p)
	srv := httptest.NewServer(mw.Handler(r))
	defer srv.Close()
	expect(t, "mistyped path", call(t, srv, http.MethodPost, "/paymnts", "k", "x"), http.StatusNotFound, false, "")
	first := post(t, srv, "k", "x")
	expect(t, "corrected", first, http.StatusCreated, false, "")
	expect(t, "retried", post(t, srv, "k", "x"), http.StatusCreated, true, first.body)

	p.next(http.StatusNotFound)
	expect(t, "handler's 404", call(t, srv, http.MethodPost, "/orders/9/cancel", "k2", "x"), http.StatusNotFound, false, "")
	expect(t, "not stored", call(t, srv, http.MethodPost, "/orders/9/cancel", "k2", "x"), http.StatusCreated, false, "")
	if p.runs.Load() != 3 {
		t.Fatalf("%d runs, want 3", p.runs.Load())
	}
}
