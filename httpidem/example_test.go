package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
)

// exchange sends one request to h and prints what came back.
func exchange(h http.Handler, method, path, key, body string) {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	replayed := w.Header().Get("Idempotent-Replayed") == "true"
	fmt.Printf("%d replayed=%v %s\n", w.Code, replayed, strings.TrimSpace(w.Body.String()))
}

// The middleware on a plain net/http ServeMux: a retried payment is charged
// once; the retry gets the first response back, marked as a replay.
func Example() {
	mw, err := httpidem.New(httpidem.Options{}) // in-memory store, defaults
	if err != nil {
		panic(err)
	}
	defer mw.Close(context.Background())

	charges := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", charges))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged %s (charge #%d)", body, charges)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(pay))

	key := `"8e03978e-40d5-43e8-bc93-6894a57f9324"`
	exchange(mux, "POST", "/payments", key, "4200")
	exchange(mux, "POST", "/payments", key, "4200") // the client's retry
	exchange(mux, "POST", "/payments", key, "9900") // the key reused for another payment
	exchange(mux, "POST", "/payments", "", "4200")  // no key
	fmt.Println("charges:", charges)
	// Output:
	// 201 replayed=false charged 4200 (charge #1)
	// 201 replayed=true charged 4200 (charge #1)
	// 422 replayed=false {"type":"https://github.com/idemrt/idem/blob/main/docs/http.md#key-reused","title":"Idempotency-Key was used with a different request","status":422,"detail":"This key was first used with another request (method, path, query or body). Use a new key for a new request."}
	// 400 replayed=false {"type":"https://github.com/idemrt/idem/blob/main/docs/http.md#missing-key","title":"Idempotency-Key is missing","status":400,"detail":"httpidem: Idempotency-Key header missing"}
	// charges: 1
}

func ExampleNew() {
	mw, err := httpidem.New(httpidem.Options{
		Methods: []string{http.MethodPost, http.MethodPut},
		Policy: idem.Policy{
			Settle: 3 * time.Second, // duplicates in flight wait up to 3s, then 409 (default 10s)
			TTL:    48 * time.Hour,  // responses are replayed for 2 days
		},
		MaxRequestBody: 64 << 10, // 413 over 64 KiB
	})
	fmt.Println(err)
	defer mw.Close(context.Background())

	_, err = httpidem.New(httpidem.Options{Policy: idem.Policy{Settle: -time.Second}})
	fmt.Println(errors.Is(err, idem.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}

func ExampleMiddleware_Handler() {
	mw, _ := httpidem.New(httpidem.Options{})
	defer mw.Close(context.Background())
	// Handler has the shape routers take for middleware, so it wraps a
	// single handler or a whole mux.
	var middleware func(http.Handler) http.Handler = mw.Handler

	api := http.NewServeMux()
	api.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "order created")
	})
	api.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "[]")
	})
	h := middleware(api)
	exchange(h, "POST", "/orders", "k-1", "{}")
	exchange(h, "POST", "/orders", "k-1", "{}")
	exchange(h, "GET", "/orders", "", "") // GET is not covered: it passes through
	// Output:
	// 201 replayed=false order created
	// 201 replayed=true order created
	// 200 replayed=false []
}

func ExampleMiddleware_Close() {
	mw, _ := httpidem.New(httpidem.Options{})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	fmt.Println(mw.Close(context.Background()))
	exchange(h, "POST", "/", "k", "")
	// Output:
	// <nil>
	// 503 replayed=false {"type":"https://github.com/idemrt/idem/blob/main/docs/http.md#unavailable","title":"Service temporarily unavailable","status":503,"detail":"The request could not be processed now; retry it later with the same Idempotency-Key."}
}

// Keys are scoped per tenant: the same key in two tenants runs twice.
func ExampleOptions_tenant() {
	mw, _ := httpidem.New(httpidem.Options{
		// From authentication in a real service, not a header the client picks.
		Tenant: func(r *http.Request) string { return r.Header.Get("X-Tenant") },
	})
	defer mw.Close(context.Background())
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		fmt.Fprintf(w, "run %d for %s", runs, r.Header.Get("X-Tenant"))
	}))
	for _, tenant := range []string{"acme", "globex", "acme"} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Idempotency-Key", "k-1")
		r.Header.Set("X-Tenant", tenant)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Body.String())
	}
	// Output:
	// run 1 for acme
	// run 2 for globex
	// run 1 for acme
}

// StoreStatus overrides which statuses are stored. Here a 404 is an outcome
// to keep (the order does not exist, and never will), on top of the
// default: a 503 is still not stored, so the retry runs.
func ExampleOptions_storeStatus() {
	mw, _ := httpidem.New(httpidem.Options{
		StoreStatus: func(status int) bool {
			return status == http.StatusNotFound || httpidem.DefaultStoreStatus(status)
		},
	})
	defer mw.Close(context.Background())
	statuses := []int{http.StatusServiceUnavailable, http.StatusNotFound, http.StatusCreated}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/cancel", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := statuses[0]
		statuses = statuses[1:]
		w.WriteHeader(s)
		io.WriteString(w, http.StatusText(s))
	})))
	for range 3 {
		exchange(mux, "POST", "/orders/9/cancel", "k", "")
	}
	// Output:
	// 503 replayed=false Service Unavailable
	// 404 replayed=false Not Found
	// 404 replayed=true Not Found
}

// By default a duplicate that arrives while the first request runs waits
// for it (up to Settle, 10s) and gets its response, marked as a replay.
func ExampleOptions_settle() {
	started, release := make(chan struct{}), make(chan struct{})
	runs := 0
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		close(started)
		<-release
		fmt.Fprintf(w, "done (run %d)", runs)
	})
	rt, _ := idem.New(idem.Options{})
	defer rt.Close(context.Background())
	mw, _ := httpidem.New(httpidem.Options{Runtime: rt})
	h := mw.Handler(slow)
	first := make(chan struct{})
	go func() {
		defer close(first)
		exchange(h, "POST", "/", "k", "")
	}()
	<-started
	duplicate := make(chan struct{})
	go func() {
		defer close(duplicate)
		exchange(h, "POST", "/", "k", "")
	}()
	for rt.Stats().Waiters == 0 {
		time.Sleep(time.Millisecond) // until the duplicate waits
	}
	close(release)
	<-first
	<-duplicate
	// Unordered output:
	// 200 replayed=false done (run 1)
	// 200 replayed=true done (run 1)
}

// With FailFast, a duplicate that arrives while the first request runs
// gets 409 at once, with Retry-After.
func ExampleOptions_failFast() {
	started, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		io.WriteString(w, "done")
	})
	mw, _ := httpidem.New(httpidem.Options{Policy: idem.Policy{FailFast: true}})
	defer mw.Close(context.Background())
	h := mw.Handler(slow)
	first := make(chan struct{})
	go func() {
		defer close(first)
		exchange(h, "POST", "/", "k", "")
	}()
	<-started
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"))
	close(release)
	<-first
	// Output:
	// 409 Retry-After: 1
	// 200 replayed=false done
}

// Logger receives handler panics, with their stack; the client gets 500
// and the key is released.
func ExampleOptions_logger() {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil)) // your service's logger
	mw, _ := httpidem.New(httpidem.Options{Logger: logger})
	defer mw.Close(context.Background())
	calls := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			panic("bug")
		}
		io.WriteString(w, "ok")
	}))
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Idempotency-Key", "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Code)
	exchange(h, "POST", "/", "k", "") // the retry runs
	// Output:
	// 500
	// 200 replayed=false ok
}

func ExampleParseKey() {
	for _, v := range []string{
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, // the draft's form: a quoted string
		`8e03978e-40d5-43e8-bc93-6894a57f9324`,   // bare, as many clients send it
		`"a \"quoted\" key"`,
		`""`,
		`k1,k2`,
	} {
		k, err := httpidem.ParseKey(v)
		fmt.Printf("%q %v\n", k, err)
	}
	// Output:
	// "8e03978e-40d5-43e8-bc93-6894a57f9324" <nil>
	// "8e03978e-40d5-43e8-bc93-6894a57f9324" <nil>
	// "a \"quoted\" key" <nil>
	// "" httpidem: malformed Idempotency-Key: "\"\"": empty
	// "" httpidem: malformed Idempotency-Key: "k1,k2": a comma: one key per request
}

func ExampleStatusFor() {
	fmt.Println(httpidem.StatusFor(httpidem.ErrMissingKey))
	fmt.Println(httpidem.StatusFor(&idem.ConflictError{Key: "k", State: "in-progress"}))
	fmt.Println(httpidem.StatusFor(idem.ErrFingerprintMismatch))
	fmt.Println(httpidem.StatusFor(httpidem.ErrBodyTooLarge))
	fmt.Println(httpidem.StatusFor(idem.ErrStoreUnavailable))
	// Output:
	// 400
	// 409
	// 422
	// 413
	// 503
}

func ExampleWriteProblem() {
	w := httptest.NewRecorder()
	httpidem.WriteProblem(w, nil, http.StatusBadRequest, httpidem.ErrMissingKey)
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Println("Link:", w.Header().Get("Link"))
	fmt.Print(w.Body.String())

	// An error of the application's own: a generic problem named after the
	// status, in RFC 9110's words.
	w = httptest.NewRecorder()
	httpidem.WriteProblem(w, nil, http.StatusUnprocessableEntity, errors.New("amount must be positive"))
	fmt.Print(w.Body.String())
	// Output:
	// 400 application/problem+json
	// Link: <https://github.com/idemrt/idem/blob/main/docs/http.md#missing-key>; rel="describedby"
	// {"type":"https://github.com/idemrt/idem/blob/main/docs/http.md#missing-key","title":"Idempotency-Key is missing","status":400,"detail":"httpidem: Idempotency-Key header missing"}
	// {"type":"about:blank","title":"Unprocessable Content","status":422,"detail":"amount must be positive"}
}
