package httpidem

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"net/http"
	"slices"
)

// response is what is stored for a key: the first response's status, the
// headers its handler set (an empty list: a header it removed), and its
// body. It is encoded with gob, which keeps header bytes that are not UTF-8.
// In this process the value may be shared between callers: it is read-only
// once stored.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// gobCodec is the idem codec of stored responses.
type gobCodec struct{}

func (gobCodec) Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	err := gob.NewEncoder(&b).Encode(v)
	return b.Bytes(), err
}

func (gobCodec) Unmarshal(data []byte, v any) error {
	return gob.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// unkept are the response headers that are not stored: they describe one
// connection, not the response (RFC 9110 §7.6.1), or would mislabel a
// replay.
var unkept = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding",
	"Upgrade", "Te", "Trailer", HeaderReplayed,
}

// recorder is the ResponseWriter the handler writes to: the handler runs
// inside idem.Do's function (on its request's goroutine, see
// idem.WithOwnerWaits in New), and only once it has returned is it known
// whether its response is stored, so it never touches the real writer.
// Every caller then writes the recorded response to its own writer, the
// handler's own request included.
//
// Like net/http, it takes the headers as they are at the first WriteHeader
// (or Write); later changes to Header() are ignored. 1xx informational
// responses are dropped, and Flush does nothing: the response is buffered.
type recorder struct {
	base    http.Header // what outer middleware had set before the handler ran
	header  http.Header
	status  int
	sent    http.Header // the headers at WriteHeader
	body    bytes.Buffer
	noStore bool // NoStore was called
}

// newRecorder starts with base's headers, so the handler sees (and may add
// to) what outer middleware set, as it would without the middleware.
func newRecorder(base http.Header) *recorder {
	return &recorder{base: base, header: base.Clone()}
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
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.body.Write(p)
}

// WriteString lets io.WriteString skip a copy.
func (r *recorder) WriteString(s string) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	return r.body.WriteString(s)
}

// Flush does nothing: the whole response is sent once the handler returns.
func (r *recorder) Flush() {}

// result returns the recorded response; a handler that wrote nothing sent an
// empty 200, as with net/http.
func (r *recorder) result() *response {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	// Keep what the handler changed; what outer middleware set belongs to
	// each request (a replay gets its own request's).
	h := http.Header{}
	for k, vs := range r.sent {
		if !slices.Equal(vs, r.base[k]) {
			h[k] = vs
		}
	}
	for k := range r.base {
		if _, ok := r.sent[k]; !ok {
			h[k] = []string{} // removed by the handler
		}
	}
	for _, k := range unkept {
		h.Del(k)
	}
	if len(h) == 0 {
		h = nil
	}
	return &response{Status: r.status, Header: h, Body: r.body.Bytes()}
}

// write sends resp to w, marked as a replay or not.
func (resp *response) write(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	for k, vs := range resp.Header {
		if len(vs) == 0 {
			delete(h, k)
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
}
