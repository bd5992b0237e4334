package httpidem

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"time"
)

// recorder is the ResponseWriter the handler writes to. The handler runs
// inside idem.Do's function, on its request's goroutine (idem.WithOwnerWaits
// in New), and by default its response is buffered: only once the handler
// has returned is it known whether the response is stored. Every caller
// then writes the recorded response to its own writer, the handler's own
// request included.
//
// A response that streams is passed through instead: when the handler
// flushes, or sends Content-Type text/event-stream, the recorder writes
// what it holds to the owner's real writer (valid until the handler
// returns, since the owner's request waits for it) and every later write
// goes straight there. Such a response is never stored.
//
// Like net/http, it takes the headers as they are at the first WriteHeader
// (or Write); later changes to Header() are ignored. 1xx informational
// responses are dropped. Besides Write, it has WriteString and ReadFrom
// (io.WriteString and io.Copy use them), and the methods
// http.ResponseController looks for (see FlushError).
type recorder struct {
	real      http.ResponseWriter // the owner's writer
	base      http.Header         // what outer middleware had set before the handler ran
	header    http.Header
	status    int
	sent      http.Header // the headers at WriteHeader
	body      bytes.Buffer
	noStore   bool // NoStore was called
	streaming bool // the response goes straight to real
}

// newRecorder starts with base's headers, so the handler sees (and may add
// to) what outer middleware set, as it would without the middleware.
func newRecorder(real http.ResponseWriter, base http.Header) *recorder {
	return &recorder{real: real, base: base, header: base.Clone()}
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status != 0 {
		return // superfluous, as net/http treats it
	}
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		return // informational: not part of the final response
	}
	if status < 100 || status > 999 {
		// net/http panics on such a code; so does this, and the panic is
		// handled like any other panic of the handler.
		panic(fmt.Sprintf("httpidem: invalid WriteHeader code %d", status))
	}
	r.status = status
	r.sent = r.header.Clone()
	if isEventStream(r.sent.Get("Content-Type")) {
		r.stream()
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.streaming {
		return r.real.Write(p)
	}
	return r.body.Write(p)
}

// WriteString lets io.WriteString skip a copy.
func (r *recorder) WriteString(s string) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.streaming {
		return io.WriteString(r.real, s)
	}
	return r.body.WriteString(s)
}

// ReadFrom lets io.Copy hand the copy to the writer: a buffered response
// reads src into its buffer, a streaming one copies it to the real writer,
// whose own ReadFrom (sendfile on a file, over plain TCP) is used.
func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.streaming {
		return io.Copy(r.real, src)
	}
	return r.body.ReadFrom(src)
}

// Flush starts streaming the response (see recorder) and flushes it to
// the client.
func (r *recorder) Flush() { _ = r.FlushError() }

// FlushError is Flush for http.ResponseController, which prefers it: it
// returns the real writer's error.
func (r *recorder) FlushError() error {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !r.streaming {
		r.stream()
	}
	return http.NewResponseController(r.real).Flush()
}

// SetWriteDeadline sets the real connection's write deadline, which also
// bounds the writing of a buffered response once the handler returns.
func (r *recorder) SetWriteDeadline(t time.Time) error {
	return http.NewResponseController(r.real).SetWriteDeadline(t)
}

// SetReadDeadline sets the real connection's read deadline. (The body the
// handler reads is already in memory.)
func (r *recorder) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(r.real).SetReadDeadline(t)
}

// EnableFullDuplex asks the real writer for full duplex, as the handler
// would without the middleware.
func (r *recorder) EnableFullDuplex() error {
	return http.NewResponseController(r.real).EnableFullDuplex()
}

// stream writes the status, the headers and the body so far to the real
// writer; later writes go straight to it.
func (r *recorder) stream() {
	r.streaming = true
	h := r.real.Header()
	for k := range r.base {
		if _, ok := r.sent[k]; !ok {
			delete(h, k) // removed by the handler
		}
	}
	for k, vs := range r.sent {
		h[k] = vs
	}
	h.Del(HeaderReplayed)
	r.real.WriteHeader(r.status)
	if r.body.Len() > 0 {
		_, _ = r.real.Write(r.body.Bytes())
		r.body.Reset()
	}
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	if contentType == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// finish ends the response once the handler has returned: a handler that
// wrote nothing sent an empty 200, as with net/http (and a stream, if it
// set Content-Type text/event-stream).
func (r *recorder) finish() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
}

// result returns the recorded response of a finished recorder that did not
// stream.
func (r *recorder) result() *response {
	// Keep what the handler did; what outer middleware set belongs to each
	// request (a replay gets its own request's).
	h, add := http.Header{}, http.Header{}
	for k, vs := range r.sent {
		base := r.base[k]
		switch {
		case slices.Equal(vs, base):
			// Left as outer middleware set it.
		case len(vs) > len(base) && slices.Equal(vs[:len(base)], base):
			add[k] = vs[len(base):] // added to (or set, where there was none)
		default:
			h[k] = vs // replaced
		}
	}
	for k := range r.base {
		if _, ok := r.sent[k]; !ok {
			h[k] = []string{} // removed by the handler
		}
	}
	for _, k := range unkept {
		h.Del(k)
		add.Del(k)
	}
	return &response{Status: r.status, Header: nilIfEmpty(h), Append: nilIfEmpty(add), Body: r.body.Bytes()}
}

func nilIfEmpty(h http.Header) http.Header {
	if len(h) == 0 {
		return nil
	}
	return h
}
