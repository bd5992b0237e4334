package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// Response headers: stored and replayed as the handler set them, byte for
// byte, and added to what outer middleware set rather than replacing it.

// Headers are stored and replayed as the handler set them at WriteHeader;
// connection headers are not; an empty response is a 200.
func TestHeaders(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/empty" {
			return
		}
		w.Header().Set("Location", "/orders/9")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set(httpidem.HeaderReplayed, "forged")
		w.WriteHeader(http.StatusAccepted)
		w.Header().Set("X-Late", "ignored")
		_, _ = io.WriteString(w, "queued")
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	for i, replayed := range []bool{false, true} {
		r := post(t, srv, "k", "x")
		expect(t, fmt.Sprint("call ", i), r, http.StatusAccepted, replayed, "queued")
		if r.header.Get("Location") != "/orders/9" || strings.Join(r.header.Values("X-Multi"), ",") != "a,b" ||
			r.header.Get("Content-Type") != "text/plain; charset=utf-8" || r.header.Get("X-Late") != "" {
			t.Fatalf("call %d: headers %v", i, r.header)
		}
	}
	expect(t, "empty", call(t, srv, http.MethodPost, "/empty", "e", ""), http.StatusOK, false, "")
	expect(t, "empty replayed", call(t, srv, http.MethodPost, "/empty", "e", ""), http.StatusOK, true, "")
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
	mw := newMiddleware(t, httpidem.Options{})
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
