package httpidem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemrt/idem/httpidem"
)

// sendWith sends one request with headers (name, value pairs) to h and prints
// what came back.
func sendWith(h http.Handler, path, key, body string, hdr ...string) {
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Idempotency-Key", key)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	replayed := w.Header().Get("Idempotent-Replayed") == "true"
	fmt.Printf("%d replayed=%v %s\n", w.Code, replayed, strings.TrimSpace(w.Body.String()))
}

// countRuns is a handler that names its run.
func countRuns() http.Handler {
	runs := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		fmt.Fprintf(w, "run %d", runs)
	})
}

// By default a key is scoped by the caller's credentials: two callers with
// one key run twice, and each gets its own response back. Name the session
// cookie in CredentialCookies so that it counts too.
func ExampleOptions_credentialCookies() {
	mw, _ := httpidem.New(httpidem.Options{CredentialCookies: []string{"session"}})
	defer mw.Close(context.Background())
	h := mw.Handler(countRuns())
	sendWith(h, "/", "k", "", "Authorization", "Bearer alice")
	sendWith(h, "/", "k", "", "Authorization", "Bearer bob")
	sendWith(h, "/", "k", "", "Cookie", "session=s-1")
	sendWith(h, "/", "k", "", "Authorization", "Bearer alice")
	// Output:
	// 200 replayed=false run 1
	// 200 replayed=false run 2
	// 200 replayed=false run 3
	// 200 replayed=true run 1
}

// Behind a gateway that authenticates callers and passes who they are in
// a header of its own (and strips what they sent), name that header: each
// consumer's keys are its own. Without it, every caller would share the
// anonymous scope.
func ExampleOptions_credentialHeaders() {
	mw, _ := httpidem.New(httpidem.Options{CredentialHeaders: []string{"X-Consumer-ID"}})
	defer mw.Close(context.Background())
	h := mw.Handler(countRuns())
	sendWith(h, "/", "k", "", "X-Consumer-ID", "acme")
	sendWith(h, "/", "k", "", "X-Consumer-ID", "globex")
	sendWith(h, "/", "k", "", "X-Consumer-ID", "acme")
	// Output:
	// 200 replayed=false run 1
	// 200 replayed=false run 2
	// 200 replayed=true run 1
}

// SharedScope: every request with the key shares it, whoever sends it. For
// endpoints without credentials.
func ExampleOptions_sharedScope() {
	mw, _ := httpidem.New(httpidem.Options{SharedScope: true})
	defer mw.Close(context.Background())
	h := mw.Handler(countRuns())
	sendWith(h, "/", "k", "", "Authorization", "Bearer alice")
	sendWith(h, "/", "k", "", "Authorization", "Bearer bob")
	// Output:
	// 200 replayed=false run 1
	// 200 replayed=true run 1
}

// A fingerprint under which reordered query parameters and re-serialised
// JSON are one request: the retry gets the stored response, not 422.
func ExampleOptions_fingerprint() {
	mw, _ := httpidem.New(httpidem.Options{
		Fingerprint: func(r *http.Request, body []byte) ([]byte, error) {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				return nil, err // answered 400
			}
			canonical, _ := json.Marshal(v) // sorted keys, no spaces
			query := r.URL.Query().Encode() // sorted by name
			return bytes.Join([][]byte{[]byte(r.Method), []byte(r.URL.Path), []byte(query), canonical}, []byte{0}), nil
		},
	})
	defer mw.Close(context.Background())
	h := mw.Handler(countRuns())
	sendWith(h, "/payments?b=2&a=1", "k", `{"amount":10,"currency":"EUR"}`)
	sendWith(h, "/payments?a=1&b=2", "k", `{ "currency": "EUR", "amount": 10 }`)
	sendWith(h, "/payments?a=1&b=2", "k", `{"amount":99,"currency":"EUR"}`)
	// Output:
	// 200 replayed=false run 1
	// 200 replayed=true run 1
	// 422 replayed=false {"type":"https://github.com/idemrt/idem/blob/main/docs/http.md#key-reused","title":"Idempotency-Key was used with a different request","status":422,"detail":"This key was first used with another request (method, path, query or body). Use a new key for a new request."}
}

// FingerprintHeaders: the same bytes under another Content-Type are another
// request.
func ExampleOptions_fingerprintHeaders() {
	mw, _ := httpidem.New(httpidem.Options{FingerprintHeaders: []string{"Content-Type"}})
	defer mw.Close(context.Background())
	h := mw.Handler(countRuns())
	sendWith(h, "/", "k", "a=1", "Content-Type", "application/x-www-form-urlencoded")
	sendWith(h, "/", "k", "a=1", "Content-Type", "text/plain")
	// Output:
	// 200 replayed=false run 1
	// 422 replayed=false {"type":"https://github.com/idemrt/idem/blob/main/docs/http.md#key-reused","title":"Idempotency-Key was used with a different request","status":422,"detail":"This key was first used with another request (method, path, query or body). Use a new key for a new request."}
}
