package httpidem_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/idemrt/idem/httpidem"
)

// DocsURL points the problems' type URIs at the API's own documentation:
// one page per problem here.
func ExampleOptions_docsURL() {
	mw, _ := httpidem.New(httpidem.Options{DocsURL: "https://api.example.com/problems/"})
	defer mw.Close(context.Background())
	h := mw.Handler(http.NotFoundHandler())
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/", nil)) // no Idempotency-Key
	fmt.Println(w.Code, w.Header().Get("Link"))
	fmt.Print(w.Body.String())
	// Output:
	// 400 <https://api.example.com/problems/missing-key>; rel="describedby"
	// {"type":"https://api.example.com/problems/missing-key","title":"Idempotency-Key is missing","status":400,"detail":"httpidem: Idempotency-Key header missing"}
}
