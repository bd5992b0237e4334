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

// The shapes DefaultRouteMiss documents beyond the ones above, with a
// policy that stores 404 and 405: for each, whether a mistyped path's miss
// is recognised (the corrected request with the key runs) and whether a
// handler's own 404 is stored.
func TestDefaultRouteMissShapes(t *testing.T) {
	for _, shape := range []struct {
		name string
		// build returns the server's handler, with p behind the middleware
		// on POST /api/payments and POST /api/orders/{id}/cancel.
		build          func(mw func(http.Handler) http.Handler, p http.Handler) http.Handler
		missSeen       bool // a miss is recognised, not stored
		handler404Kept bool // a handler's 404 is stored
	}{
		{"inside StripPrefix under a ServeMux route", func(mw func(http.Handler) http.Handler, p http.Handler) http.Handler {
			outer := http.NewServeMux()
			outer.Handle("/api/", http.StripPrefix("/api", mw(innerMux(p))))
			return outer
		}, true, true},
		{"StripPrefix between the middleware and the mux", func(mw func(http.Handler) http.Handler, p http.Handler) http.Handler {
			outer := http.NewServeMux()
			outer.Handle("/api/", mw(http.StripPrefix("/api", innerMux(p))))
			return outer
		}, false, true},
		{"chi's Use, chi under a ServeMux route", func(mw func(http.Handler) http.Handler, p http.Handler) http.Handler {
			outer := http.NewServeMux()
			outer.Handle("/api/", chiRouter(mw, p))
			return outer
		}, false, true},
		{"no router", noRouter, true, false},
	} {
		t.Run(shape.name, func(t *testing.T) {
			checkRouteMiss(t, httpidem.Options{StoreStatus: storeAll}, shape.build, shape.missSeen, shape.handler404Kept)
		})
	}
}

// Options.RouteMiss covers the shapes the default gets wrong: without a
// router, a handler's 404 is its own answer; chi under a ServeMux route
// tells a miss by its route context.
func TestRouteMissHook(t *testing.T) {
	t.Run("no router", func(t *testing.T) {
		// Every 404 is the handler's own answer: its 404 for an unknown
		// path too, which is stored (the corrected request is a 422).
		never := func(int, *http.Request) bool { return false }
		checkRouteMiss(t, httpidem.Options{StoreStatus: storeAll, RouteMiss: never}, noRouter, false, true)
	})
	t.Run("chi's Use, chi under a ServeMux route", func(t *testing.T) {
		chiMiss := func(status int, r *http.Request) bool {
			rctx := chi.RouteContext(r.Context())
			return (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) &&
				(rctx == nil || rctx.RoutePattern() == "")
		}
		checkRouteMiss(t, httpidem.Options{StoreStatus: storeAll, RouteMiss: chiMiss},
			func(mw func(http.Handler) http.Handler, p http.Handler) http.Handler {
				outer := http.NewServeMux()
				outer.Handle("/api/", chiRouter(mw, p))
				return outer
			}, true, true)
	})
}

// noRouter is mw around a handler that routes by itself, without a
// router: it answers 404 for a path it does not serve.
func noRouter(mw func(http.Handler) http.Handler, p http.Handler) http.Handler {
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/payments" && r.URL.Path != "/api/orders/9/cancel" {
			http.NotFound(w, r)
			return
		}
		p.ServeHTTP(w, r)
	}))
}

// innerMux routes POST /payments and POST /orders/{id}/cancel to p.
func innerMux(p http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /payments", p)
	mux.Handle("POST /orders/{id}/cancel", p)
	return mux
}

// chiRouter is a chi router with mw in its Use, routing POST
// /api/payments and POST /api/orders/{id}/cancel to p.
func chiRouter(mw func(http.Handler) http.Handler, p http.Handler) chi.Router {
	r := chi.NewRouter()
	r.Use(mw)
	r.Method(http.MethodPost, "/api/payments", p)
	r.Method(http.MethodPost, "/api/orders/{id}/cancel", p)
	return r
}

// checkRouteMiss serves build's handler and checks, on a mistyped path
// then the corrected one with the same key, whether the miss was
// recognised, and whether a handler's 404 is stored.
func checkRouteMiss(t *testing.T, o httpidem.Options, build func(func(http.Handler) http.Handler, http.Handler) http.Handler, missSeen, handler404Kept bool) {
	t.Helper()
	mw := newMiddleware(t, o)
	p := newPayments()
	srv := httptest.NewServer(build(mw.Handler, p))
	defer srv.Close()
	expect(t, "mistyped path", call(t, srv, http.MethodPost, "/api/paymnts", "k", "x"), http.StatusNotFound, false, "")
	corrected := call(t, srv, http.MethodPost, "/api/payments", "k", "x")
	if seen := corrected.status == http.StatusCreated; seen != missSeen {
		t.Fatalf("the corrected request got %d: miss recognised %v, want %v", corrected.status, seen, missSeen)
	}
	p.next(http.StatusNotFound)
	gone := call(t, srv, http.MethodPost, "/api/orders/9/cancel", "k2", "x")
	expect(t, "no such order", gone, http.StatusNotFound, false, "")
	again := call(t, srv, http.MethodPost, "/api/orders/9/cancel", "k2", "x")
	if kept := again.replayed && again.status == http.StatusNotFound; kept != handler404Kept {
		t.Fatalf("the handler's 404 retried: %d replayed %v; stored %v, want %v", again.status, again.replayed, kept, handler404Kept)
	}
}
