package httpidem_test

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Response headers: stored and replayed as the handler set them, byte for
// byte, and added to what outer middleware set for each request rather than
// replacing it.

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
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{FailFast: true}, MaxRequestBody: 16}, p)
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

// The case: outer middleware sets a per-request value (a CSRF
// cookie) and the handler adds one of its own (a receipt cookie). A replay
// gets its own request's outer value and the handler's, never the first
// request's outer value. A header whose outer value the handler replaced,
// or removed, is replaced or removed on the replay too.
func TestReplayKeepsItsOwnOuterHeaderValues(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{})
	inner := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "receipt=1")
		w.Header().Set("Cache-Control", "no-store") // replaces the outer value
		w.Header().Del("X-Outer-Only")
		w.WriteHeader(http.StatusCreated)
	}))
	var n atomic.Int32
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Add("Set-Cookie", fmt.Sprintf("csrf=token-%d", i))
		w.Header().Set("Cache-Control", fmt.Sprintf("max-age=%d", i))
		w.Header().Set("X-Outer-Only", "1")
		w.Header().Set("X-Request-Id", fmt.Sprint(i))
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(outer)
	defer srv.Close()
	for i, want := range []struct {
		replayed bool
		cookies  string
		id       string
	}{{false, "csrf=token-1,receipt=1", "1"}, {true, "csrf=token-2,receipt=1", "2"}} {
		r := do(srv, http.MethodPost, "/x", "k", "x")
		expect(t, fmt.Sprint("call ", i), r, http.StatusCreated, want.replayed, "")
		if got := strings.Join(r.header.Values("Set-Cookie"), ","); got != want.cookies {
			t.Fatalf("call %d: Set-Cookie %q, want %q", i, got, want.cookies)
		}
		if cc, id, gone := r.header.Values("Cache-Control"), r.header.Get("X-Request-Id"), r.header.Get("X-Outer-Only"); len(cc) != 1 || cc[0] != "no-store" || id != want.id || gone != "" {
			t.Fatalf("call %d: Cache-Control %q, X-Request-Id %q, X-Outer-Only %q", i, cc, id, gone)
		}
	}
}

// gobCodec is the codec the middleware stores its records with.
type gobCodec struct{}

func (gobCodec) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(v)
	return b.Bytes(), err
}

func (gobCodec) Unmarshal(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// A record stored by a version of the middleware whose records had no list
// of added headers (every header the handler changed was stored whole, and
// replaced the replay's) is replayed as it was then.
func TestRecordWithoutAddedHeadersStillReplays(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	type oldRecord struct {
		Status int
		Header http.Header
		Body   []byte
	}
	old := idemtest.Runtime(t, idem.Options{Store: mem})
	key := store.BuildKey("k", store.Scope{Version: "http"}) // anonymous scope
	_, err := idem.Do(bg, old, key, func(context.Context) (oldRecord, error) {
		return oldRecord{Status: http.StatusCreated, Body: []byte("paid"),
			Header: http.Header{"Set-Cookie": {"csrf=old", "receipt=1"}, "X-Outer-Only": {}}}, nil
	}, idem.WithCodec(gobCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	rt := idemtest.Runtime(t, idem.Options{Store: mem})
	mw := newMiddleware(t, httpidem.Options{Runtime: rt})
	inner := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran for a stored key")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "csrf=new")
		w.Header().Set("X-Outer-Only", "1")
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	r := do(srv, http.MethodPost, "/x", "k", "x")
	expect(t, "old record", r, http.StatusCreated, true, "paid")
	if got := strings.Join(r.header.Values("Set-Cookie"), ","); got != "csrf=old,receipt=1" || r.header.Get("X-Outer-Only") != "" {
		t.Fatalf("Set-Cookie %q, X-Outer-Only %q: not replayed as the old record says", got, r.header.Get("X-Outer-Only"))
	}
}
