package httpidem_test

import (
	"context"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/idemrt/idem/httpidem"
)

// With chi, the middleware goes in Use like any other: it covers the POST
// and PATCH routes of the router and lets the rest through.
func ExampleMiddleware_Handler_chi() {
	mw, _ := httpidem.New(httpidem.Options{})
	defer mw.Close(context.Background())

	r := chi.NewRouter()
	r.Use(mw.Handler)
	created := 0
	r.Post("/orders", func(w http.ResponseWriter, r *http.Request) {
		created++
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "order created")
	})
	r.Get("/orders", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "[]") })

	exchange(r, "POST", "/orders", "k-1", "{}")
	exchange(r, "POST", "/orders", "k-1", "{}")
	exchange(r, "GET", "/orders", "", "")
	// Output:
	// 201 replayed=false order created
	// 201 replayed=true order created
	// 200 replayed=false []
}
