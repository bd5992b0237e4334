package httpidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/idemrt/idem/httpidem"
)

func ExampleDefaultStoreStatus() {
	for _, s := range []int{201, 402, 409, 400, 401, 404, 406, 412, 422, 428, 429, 503} {
		fmt.Println(s, httpidem.DefaultStoreStatus(s))
	}
	// Output:
	// 201 true
	// 402 true
	// 409 true
	// 400 false
	// 401 false
	// 404 false
	// 406 false
	// 412 false
	// 422 false
	// 428 false
	// 429 false
	// 503 false
}

// A handler marks an answer that a retry may change: its client gets it, but
// it is not stored, so the retry runs.
func ExampleNoStore() {
	mw, _ := httpidem.New(httpidem.Options{})
	defer mw.Close(context.Background())
	upstreamUp := false
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !upstreamUp {
			httpidem.NoStore(w)
			io.WriteString(w, `{"status":"pending"}`)
			return
		}
		io.WriteString(w, `{"status":"paid"}`)
	}))
	exchange(h, "POST", "/", "k", "")
	upstreamUp = true
	exchange(h, "POST", "/", "k", "")
	exchange(h, "POST", "/", "k", "")
	// Output:
	// 200 replayed=false {"status":"pending"}
	// 200 replayed=false {"status":"paid"}
	// 200 replayed=true {"status":"paid"}
}
