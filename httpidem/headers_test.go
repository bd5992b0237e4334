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

// Every answer to a keyed request names its key, as the client sent it:
// the first run, a replay, a waiter's, and the problems once the key is
// parsed. A handler's own Idempotency-Key header is not what the client
// gets.
func TestKeyEchoed(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Runtime: rt, FailFast: true, MaxRequestBody: 16}, p)
	forging, _ := serve(t, httpidem.Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(httpidem.HeaderKey, "forged")
		w.WriteHeader(http.StatusCreated)
	}))
	echoed := func(what string, r reply, want string) {
		t.Helper()
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.header.Values(httpidem.HeaderKey); len(got) != 1 || got[0] != want {
			t.Fatalf("%s: Idempotency-Key %q, want %q", what, got, want)
		}
	}
	echoed("first run", post(t, srv, `"k-1"`, "x"), `"k-1"`)
	echoed("replay, bare form", post(t, srv, "k-1", "x"), "k-1")
	echoed("422", post(t, srv, "k-1", "y"), "k-1")
	echoed("413", post(t, srv, "k-2", strings.Repeat("x", 17)), "k-2")
	release := p.Hold()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k-3", "x") }()
	p.WaitStarted(t)
	echoed("409", post(t, srv, "k-3", "x"), "k-3")
	release()
	echoed("owner", idemtest.Recv(t, owner), "k-3")
	echoed("handler's own", post(t, forging, "k-4", "x"), "k-4")
	echoed("handler's own, replayed", post(t, forging, "k-4", "x"), "k-4")
	// Not parsed: nothing to echo.
	for _, key := range []string{"", "a,b"} {
		if r := post(t, srv, key, "x"); r.header.Get(httpidem.HeaderKey) != "" {
			t.Fatalf("key %q: echoed %q", key, r.header.Get(httpidem.HeaderKey))
		}
	}
}
