package httpidem_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Handler panics: the client gets 500, the panic is logged, and the key is
// released for the retry, whether the client waited, other requests waited,
// or the client had left.

// A panicking handler: its client gets 500, the panic is logged with its
// stack, and the key is released. panic(http.ErrAbortHandler) aborts the
// response instead, silently.
func TestPanic(t *testing.T) {
	var logs logBuffer
	var runs atomic.Int32
	var mode atomic.Value
	mode.Store("")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		switch mode.Swap("") {
		case "panic":
			w.WriteHeader(http.StatusCreated) // half-written responses are dropped
			panic("card reader on fire")
		case "abort":
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "ok")
	})
	srv, _ := serve(t, httpidem.Options{Logger: logs.logger()}, h)

	mode.Store("panic")
	expectProblem(t, "panic", post(t, srv, "k1", "x"), http.StatusInternalServerError)
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "card reader on fire") ||
		!strings.Contains(out, "panic_test.go") || !strings.Contains(out, `key=k1`) {
		t.Fatalf("the panic was not logged with its stack:\n%s", out)
	}
	expect(t, "retry", post(t, srv, "k1", "x"), http.StatusCreated, false, "ok")

	mode.Store("abort")
	// (A body without GetBody: net/http's client retries requests that
	// carry an Idempotency-Key by itself when it can rewind the body.)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", io.MultiReader(strings.NewReader("x")))
	req.Header.Set(httpidem.HeaderKey, "k2")
	if r := send(srv, req); r.err == nil {
		t.Fatalf("aborted response arrived: %+v", r)
	}
	expect(t, "retry after abort", post(t, srv, "k2", "x"), http.StatusCreated, false, "ok")
	if n := runs.Load(); n != 4 {
		t.Fatalf("%d runs, want 4", n)
	}
	if strings.Contains(logs.String(), "abort Handler") {
		t.Fatalf("the abort was logged as a panic:\n%s", logs.String())
	}
}

// The requests waiting for a request whose handler panics get 500 too; the
// key is released and the retry runs.
func TestPanicWithWaiters(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	var logs logBuffer
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			close(started)
			<-release
			panic("boom")
		}
		_, _ = io.WriteString(w, "ok")
	})
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{Settle: 10 * time.Second}, Logger: logs.logger()}, h)
	replies := make(chan reply, 3)
	go func() { replies <- do(srv, http.MethodPost, "/", "k", "x") }()
	<-started
	for range 2 {
		go func() { replies <- do(srv, http.MethodPost, "/", "k", "x") }()
	}
	idemtest.Eventually(t, "2 parked requests", func() bool { return rt.Stats().Waiters == 2 })
	close(release)
	for range 3 {
		expectProblem(t, "panicked run", <-replies, http.StatusInternalServerError)
	}
	if n := strings.Count(logs.String(), "handler panicked"); n != 1 {
		t.Fatalf("the panic was logged %d times:\n%s", n, logs.String())
	}
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusOK, false, "ok")
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
	leave(t, srv, "/payments", "k", func() { idemtest.Recv(t, started) })
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

// A panicking Options.Tenant or Options.Fingerprint: the request is
// answered 500 (not a dropped connection), nothing runs, and the panic is
// logged through Options.Logger with its stack.
func TestOptionFunctionPanicIs500(t *testing.T) {
	for name, o := range map[string]httpidem.Options{
		"Tenant": {Tenant: func(*http.Request) string { panic("no principal in the context") }},
		"Fingerprint": {Fingerprint: func(*http.Request, []byte) ([]byte, error) {
			panic("no principal in the context")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			var logs logBuffer
			o.Logger = logs.logger()
			p := newPayments()
			srv, _ := serve(t, o, p)
			expectProblem(t, "panic", post(t, srv, "k", "x"), http.StatusInternalServerError)
			out := logs.String()
			if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "Options."+name+" panicked") ||
				!strings.Contains(out, "no principal in the context") || !strings.Contains(out, "panic_test.go") {
				t.Fatalf("the panic was not logged with its stack:\n%s", out)
			}
			if p.runs.Load() != 0 {
				t.Fatalf("%d runs, want 0", p.runs.Load())
			}
		})
	}
}
