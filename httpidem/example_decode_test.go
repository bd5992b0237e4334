package httpidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// A tool that reads the store itself (the admin command does) decodes a
// stored response from the record's value.
func ExampleDecodeResponse() {
	mem := memstore.New(memstore.Options{})
	rt, _ := idem.New(idem.Options{Store: mem})
	defer rt.Close(context.Background())
	mw, _ := httpidem.New(httpidem.Options{Runtime: rt, Tenant: func(*http.Request) string { return "acme" }})
	defer mw.Close(context.Background())
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "charged 4200")
	}))
	alice(h, "POST", "/payments", "order-7")

	// The key as the middleware stores it: the tenant's scope, version "http".
	rec, err := mem.Get(context.Background(), store.BuildKey("order-7", store.Scope{Namespace: "acme", Version: "http"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := httpidem.DecodeResponse(rec.Value)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"), string(resp.Body))
	_, err = httpidem.DecodeResponse([]byte(`"not a response"`))
	fmt.Println(err != nil)
	// Output:
	// 201 charged 4200
	// 201 text/plain charged 4200
	// true
}
