package httpidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemrt/idem/httpidem"
)

// A handler that streams (it flushes, or sends text/event-stream) writes
// straight to its client. Its response is not stored: the same key runs
// again.
func ExampleMiddleware_Handler_stream() {
	mw, _ := httpidem.New(httpidem.Options{})
	defer mw.Close(context.Background())
	runs := 0
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: progress (run %d)\n\n", runs)
		http.NewResponseController(w).Flush() // on its way to the client now
		io.WriteString(w, "data: done\n\n")
	}))
	for range 2 {
		r := httptest.NewRequest("POST", "/jobs", nil)
		r.Header.Set("Idempotency-Key", "job-1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		events := strings.Split(strings.TrimSpace(w.Body.String()), "\n\n")
		fmt.Println(w.Flushed, strings.Join(events, " | "))
	}
	// Output:
	// true data: progress (run 1) | data: done
	// true data: progress (run 2) | data: done
}
