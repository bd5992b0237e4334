package httpidem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
)

// alice sends one request to h as the caller "Bearer alice" and prints
// what came back.
func alice(h http.Handler, method, path, key string) {
	r := httptest.NewRequest(method, path, strings.NewReader("4200"))
	r.Header.Set("Authorization", "Bearer alice")
	r.Header.Set("Idempotency-Key", key)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(strings.TrimSpace(fmt.Sprint(w.Code, " ", w.Body.String())))
}

// A status endpoint: a client that lost the answer to its POST asks, with
// its key and its credentials, what the POST got, and nothing runs again.
// Scope gives the caller's scope from its request.
func ExampleMiddleware_Response() {
	mw, _ := httpidem.New(httpidem.Options{})
	defer mw.Close(context.Background())

	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "charged 4200")
	})))
	mux.HandleFunc("GET /payments/status", func(w http.ResponseWriter, r *http.Request) {
		key, err := httpidem.ParseKey(r.Header.Get("Idempotency-Key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := mw.Response(r.Context(), key, mw.Scope(r))
		switch {
		case errors.Is(err, idem.ErrNotFound):
			http.Error(w, "no such operation", http.StatusNotFound)
		case errors.Is(err, idem.ErrInProgress):
			http.Error(w, "still running", http.StatusConflict)
		case err != nil:
			http.Error(w, "try later", http.StatusServiceUnavailable)
		default:
			fmt.Fprintf(w, "the POST got %d: %s", resp.Status, resp.Body)
		}
	})

	alice(mux, "GET", "/payments/status", "order-7")
	alice(mux, "POST", "/payments", "order-7")
	alice(mux, "GET", "/payments/status", "order-7")
	// Output:
	// 404 no such operation
	// 201 charged 4200
	// 200 the POST got 201: charged 4200
}

// State says where a key is without reading its response: absent, in
// progress, or completed.
func ExampleMiddleware_State() {
	mw, _ := httpidem.New(httpidem.Options{Tenant: func(r *http.Request) string { return "acme" }})
	defer mw.Close(context.Background())
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))

	st, _ := mw.State(context.Background(), "order-7", "acme")
	fmt.Println(st.Status)
	alice(h, "POST", "/payments", "order-7")
	st, _ = mw.State(context.Background(), "order-7", "acme")
	fmt.Println(st.Status)
	// Output:
	// absent
	// 201
	// completed
}

// Forget deletes a stored response (one recorded in error, say): the next
// request with the key runs the handler again.
func ExampleMiddleware_Forget() {
	mw, _ := httpidem.New(httpidem.Options{Tenant: func(r *http.Request) string { return "acme" }})
	defer mw.Close(context.Background())
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		fmt.Fprintf(w, "run %d", runs)
	}))

	alice(h, "POST", "/payments", "order-7")
	alice(h, "POST", "/payments", "order-7") // replayed
	fmt.Println(mw.Forget(context.Background(), "order-7", "acme"))
	alice(h, "POST", "/payments", "order-7") // runs again
	// Output:
	// 200 run 1
	// 200 run 1
	// <nil>
	// 200 run 2
}
