package httpidem_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Streaming passes through: a handler that flushes, or sends
// text/event-stream, writes to its client as it goes. Such a response is
// never stored; the key is released when the handler returns.

// streamer writes a first event, flushes it with flush, waits for the test
// to release it, then writes a second event.
type streamer struct {
	contentType string
	flush       func(w http.ResponseWriter) error
	release     chan struct{}
	runs        atomic.Int32
}

func newStreamer(contentType string, flush func(http.ResponseWriter) error) *streamer {
	return &streamer{contentType: contentType, flush: flush, release: make(chan struct{}, 100)}
}

func (s *streamer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.runs.Add(1)
	w.Header().Set("Content-Type", s.contentType)
	fmt.Fprintf(w, "data: one (run %d)\n\n", n)
	if err := s.flush(w); err != nil {
		fmt.Fprintf(w, "data: flush failed: %v\n\n", err)
	}
	<-s.release
	fmt.Fprintf(w, "data: two (run %d)\n\n", n)
}

var flushes = map[string]func(http.ResponseWriter) error{
	"http.Flusher": func(w http.ResponseWriter) error {
		w.(http.Flusher).Flush()
		return nil
	},
	"http.ResponseController": func(w http.ResponseWriter) error {
		return http.NewResponseController(w).Flush()
	},
}

// open sends a keyed POST and returns the response once its headers are
// in; the caller reads the body.
func open(t *testing.T, srv *httptest.Server, key string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/events", strings.NewReader("subscribe"))
	req.Header.Set(httpidem.HeaderKey, key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// event reads one event (up to its blank line).
func event(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading an event: %v (so far %q)", err, b.String())
		}
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}

// The case: the first event of a text/event-stream response reaches
// the client while the handler still runs (it waits for the test, which
// reads the event first). The response is not stored: the retry runs.
func TestEventStreamReachesClientBeforeHandlerReturns(t *testing.T) {
	for name, flush := range flushes {
		t.Run(name, func(t *testing.T) {
			s := newStreamer("text/event-stream", flush)
			srv, _ := serve(t, httpidem.Options{}, s)
			resp := open(t, srv, "k")
			if resp.Header.Get(httpidem.HeaderKey) != "k" || resp.Header.Get(httpidem.HeaderReplayed) != "" {
				t.Fatalf("stream headers %v", resp.Header)
			}
			body := bufio.NewReader(resp.Body)
			if got := event(t, body); got != "data: one (run 1)\n" {
				t.Fatalf("first event %q", got)
			}
			s.release <- struct{}{} // only now may the handler go on
			if got := event(t, body); got != "data: two (run 1)\n" {
				t.Fatalf("second event %q", got)
			}
			s.release <- struct{}{} // for the retry's run
			expect(t, "retry", call(t, srv, http.MethodPost, "/events", "k", "subscribe"), http.StatusOK, false,
				"data: one (run 2)\n\ndata: two (run 2)\n\n")
		})
	}
}

// A handler that flushes another content type streams too: what it wrote
// before the flush goes out with it.
func TestFlushStreamsResponse(t *testing.T) {
	for name, flush := range flushes {
		t.Run(name, func(t *testing.T) {
			s := newStreamer("application/x-ndjson", flush)
			srv, _ := serve(t, httpidem.Options{}, s)
			body := bufio.NewReader(open(t, srv, "k").Body)
			if got := event(t, body); got != "data: one (run 1)\n" {
				t.Fatalf("first part %q", got)
			}
			s.release <- struct{}{}
			if got := event(t, body); got != "data: two (run 1)\n" {
				t.Fatalf("second part %q", got)
			}
			s.release <- struct{}{} // for the retry's run
			expect(t, "retry runs", call(t, srv, http.MethodPost, "/events", "k", "subscribe"), http.StatusOK, false, "")
			if s.runs.Load() != 2 {
				t.Fatalf("%d runs, want 2", s.runs.Load())
			}
		})
	}
}

// A request waiting for a streaming run is handed the key when it ends,
// and runs its own stream, as with any response that is not stored.
func TestStreamWaiterRunsAfterRelease(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	s := newStreamer("text/event-stream", flushes["http.Flusher"])
	srv, _ := serve(t, httpidem.Options{Runtime: rt}, s)
	body := bufio.NewReader(open(t, srv, "k").Body)
	event(t, body)
	waiter := make(chan reply, 1)
	go func() { waiter <- do(srv, http.MethodPost, "/events", "k", "subscribe") }()
	idemtest.Eventually(t, "the waiting request", func() bool { return rt.Stats().Waiters == 1 })
	s.release <- struct{}{}
	event(t, body)
	s.release <- struct{}{} // for the waiter's run
	expect(t, "waiter", idemtest.Recv(t, waiter), http.StatusOK, false, "data: one (run 2)\n\ndata: two (run 2)\n\n")
}

// A handler that panics mid-stream: the response is cut short (as net/http
// does), and the key is released.
func TestPanicMidStreamAbortsResponse(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) > 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-release
		panic("mid-stream")
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	body := bufio.NewReader(open(t, srv, "k").Body)
	event(t, body)
	close(release)
	if rest, err := io.ReadAll(body); err == nil {
		t.Fatalf("the stream ended cleanly after a panic: %q", rest)
	}
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusOK, false, "ok")
}

// spy is a writer in front of the middleware that records the
// http.ResponseController calls that reach it, and passes them on.
type spy struct {
	http.ResponseWriter
	calls []string
}

func (s *spy) SetWriteDeadline(t time.Time) error {
	s.calls = append(s.calls, "SetWriteDeadline")
	return http.NewResponseController(s.ResponseWriter).SetWriteDeadline(t)
}

func (s *spy) SetReadDeadline(t time.Time) error {
	s.calls = append(s.calls, "SetReadDeadline")
	return http.NewResponseController(s.ResponseWriter).SetReadDeadline(t)
}

func (s *spy) EnableFullDuplex() error {
	s.calls = append(s.calls, "EnableFullDuplex")
	return http.NewResponseController(s.ResponseWriter).EnableFullDuplex()
}

func (s *spy) FlushError() error {
	s.calls = append(s.calls, "Flush")
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// http.ResponseController works through the middleware: SetWriteDeadline,
// SetReadDeadline, EnableFullDuplex and Flush reach the real writer and
// succeed.
func TestResponseControllerReachesRealWriter(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{})
	var errs []error
	inner := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		later := time.Now().Add(time.Hour)
		errs = append(errs, rc.SetWriteDeadline(later), rc.SetReadDeadline(later), rc.EnableFullDuplex(), rc.Flush())
		io.WriteString(w, "done")
	}))
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := &spy{ResponseWriter: w}
		inner.ServeHTTP(s, r)
		calls = s.calls
	}))
	defer srv.Close()
	r := do(srv, http.MethodPost, "/", "k", "x")
	expect(t, "response", r, http.StatusOK, false, "done")
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	// The middleware's own read deadline for the body (set, then cleared)
	// comes first.
	if got := strings.Join(calls, ","); got != "SetReadDeadline,SetReadDeadline,SetWriteDeadline,SetReadDeadline,EnableFullDuplex,Flush" {
		t.Fatalf("calls that reached the real writer: %s", got)
	}
}

// A write deadline the handler sets bounds the real connection: one already
// past makes the (buffered) response fail to go out, as it would without
// the middleware. The response was stored all the same; the retry gets it.
func TestWriteDeadlineAppliesToConnection(t *testing.T) {
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
			fmt.Fprintf(w, "SetWriteDeadline: %v", err)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d", n)
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	// (A body without GetBody: net/http's client would retry a request
	// with an Idempotency-Key by itself when it can rewind the body.)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/payments", io.MultiReader(strings.NewReader("x")))
	req.Header.Set(httpidem.HeaderKey, "k")
	if r := send(srv, req); r.err == nil {
		t.Fatalf("the response went out past its write deadline: %d %q", r.status, r.body)
	}
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusCreated, true, "run 1")
}

// The writer the handler gets is an io.ReaderFrom, as net/http's is, so
// io.Copy hands it the copy: into the buffer of a response that is stored,
// straight to the client once it streams.
func TestReaderFromPassesThrough(t *testing.T) {
	var readerFrom atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := w.(io.ReaderFrom)
		readerFrom.Store(ok)
		if r.URL.Path == "/stream" {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		// A reader that is not a WriterTo, so that io.Copy asks the writer.
		io.Copy(w, io.MultiReader(strings.NewReader("data: copied\n\n")))
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	first := post(t, srv, "k", "x")
	expect(t, "buffered", first, http.StatusOK, false, "data: copied\n\n")
	expect(t, "stored", post(t, srv, "k", "x"), http.StatusOK, true, first.body)
	expect(t, "streamed", call(t, srv, http.MethodPost, "/stream", "k2", "x"), http.StatusOK, false, "data: copied\n\n")
	if !readerFrom.Load() {
		t.Fatal("the handler's writer is no io.ReaderFrom")
	}
}

// An event stream that does not flush reaches the client as it would
// without the middleware: once net/http's buffers (about 4 KiB) fill,
// while the handler still runs.
func TestEventStreamWithoutFlushArrivesOnceBufferFills(t *testing.T) {
	release := make(chan struct{})
	srv, _ := serve(t, httpidem.Options{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/Event-Stream; charset=utf-8")
		fmt.Fprintf(w, "data: %s\n\n", strings.Repeat("a", 8<<10))
		<-release
	}))
	defer close(release)
	if got := event(t, bufio.NewReader(open(t, srv, "k").Body)); len(got) < 8<<10 {
		t.Fatalf("first event of %d bytes", len(got))
	}
}
