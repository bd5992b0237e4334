package httpidem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
)

// A handler behind the middleware finds its claim in the request's context.
func TestHandlerSeesItsClaim(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{})
	var c idem.Claim
	var ok bool
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok = idem.ClaimFrom(r.Context())
		w.WriteHeader(http.StatusCreated)
	}))
	r := httptest.NewRequest("POST", "/payments", strings.NewReader("{}"))
	r.Header.Set("Idempotency-Key", `"k-1"`)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusCreated {
		t.Fatalf("status %d", w.Code)
	}
	if !ok || c.Fence == 0 || c.Attempt != 1 || !strings.Contains(c.Key, "k-1") {
		t.Fatalf("handler claim = %+v (%v)", c, ok)
	}
}
