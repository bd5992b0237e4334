package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Whether the handler ran decides what the client is told: a request whose
// handler ran gets the handler's response even when storing it did not
// finish (never a 503 that says nothing ran), and a request that never ran
// is never told that its key is in progress.

// failingComplete is a store whose Complete fails while fail is set, as a
// store does when the connection drops while it stores a result. (It
// embeds the store.Store interface alone, so the runtime talks to it as to
// a remote store, in batches, and retries the Complete.)
type failingComplete struct {
	store.Store
	fail atomic.Bool
}

func (f *failingComplete) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if f.fail.Load() {
		return store.Record{}, errors.New("test: connection reset while storing")
	}
	return f.Store.Complete(ctx, key, tok, rec, ttl)
}

// charge is a handler that counts its runs and charges: its response is the
// one its client must get.
func charge(runs *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged 42 (run %d)", n)
	})
}

// The store fails the Complete of a response the handler produced: its
// client gets that response (not 503 "nothing ran"), a warning is logged,
// and the runtime goes on storing it, so the retry, once the store is
// back, gets it replayed without a second run.
func TestStoreFailureAfterRunSendsTheResponse(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	st := &failingComplete{Store: mem}
	st.fail.Store(true)
	rt := idemtest.Runtime(t, idem.Options{Store: st, Logger: discard})
	var logs logBuffer
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Logger: logs.logger()}, charge(&runs))

	expect(t, "the run the store did not take", post(t, srv, "k", "x"), http.StatusCreated, false, "charged 42 (run 1)")
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "storing its response did not finish") ||
		!strings.Contains(out, "connection reset while storing") {
		t.Fatalf("no warning logged:\n%s", out)
	}
	st.fail.Store(false)
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusCreated, true, "charged 42 (run 1)")
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

// A server-side deadline (a timeout middleware in front) passes while the
// handler runs, on a real Redis: the handler's context keeps the deadline
// but the handler goes on and charges; its request's wait for the store's
// answer then ends at once. Its client, still connected, gets the
// handler's response; the runtime stores it; the retry gets it replayed.
// A handler that panics past the deadline is a 500, not a 503.
func TestDeadlineDuringRunSendsTheResponseRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rt := redisRuntime(t, srv, fmt.Sprintf("h%d:", prefixSeq.Add(1)))
	var runs atomic.Int32
	mw := newMiddleware(t, httpidem.Options{Runtime: rt})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		<-r.Context().Done() // the deadline passes while the handler runs
		if r.Header.Get("X-Panic") != "" {
			panic("card reader on fire")
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged 42 (run %d)", n)
	}))
	timeout := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Timeout") != "" {
			ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	}))
	defer timeout.Close()

	first := post(t, timeout, "k", "x", "X-Timeout", "1")
	expect(t, "the run past its deadline", first, http.StatusCreated, false, "charged 42 (run 1)")
	expect(t, "retry", post(t, timeout, "k", "x"), http.StatusCreated, true, first.body)
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}

	expectProblem(t, "a panic past the deadline", post(t, timeout, "k2", "x", "X-Timeout", "1", "X-Panic", "1"),
		http.StatusInternalServerError)
}

// A request whose context ended before its handler could run (a slow
// upload outlasted a server timeout) holds no key and ran nothing: it gets
// 503 with Retry-After, not a 409 "in progress" for a key nobody holds,
// and the retry runs.
func TestContextEndedBeforeRunIs503(t *testing.T) {
	p := newPayments()
	mw := newMiddleware(t, httpidem.Options{})
	h := mw.Handler(p)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Slow-Upload") != "" {
			ctx, cancel := context.WithTimeout(r.Context(), time.Millisecond)
			defer cancel()
			<-ctx.Done() // the body took longer than the server allows
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	r := post(t, srv, "k", "x", "X-Slow-Upload", "1")
	expectProblem(t, "the slow upload", r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("503 with Retry-After %q, want 1", r.header.Get("Retry-After"))
	}
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusCreated, false, "")
	if n := p.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}
