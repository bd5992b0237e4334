package httpidem

import (
	"bytes"
	"encoding/gob"
	"net/http"
	"slices"
)

// response is what is stored for a key: the first response's status, the
// headers its handler set, and its body. It is encoded with gob, which
// keeps header bytes that are not UTF-8, and decodes a record written
// before a field was added (Append, nil then).
//
// The headers are what the handler did to the headers outer middleware had
// set, which belong to each request: Append holds the values it added
// after them (or to a header they did not have), which a replay adds to
// its own request's; Header holds the headers whose outer values it
// replaced (and, as an empty list, those it removed), which a replay
// replaces. In this process the value may be shared between callers: it
// is read-only once stored.
type response struct {
	Status int
	Header http.Header
	Body   []byte
	Append http.Header
}

// storedSize bounds from above the bytes r takes encoded (gobCodec): its
// body, each header name and value with room for its length, and room
// for gob's type description.
func (r *response) storedSize() int {
	const perString, fixed = 10, 256 // gob describes the type in about 110 bytes
	n := fixed + len(r.Body)
	for _, h := range []http.Header{r.Header, r.Append} {
		for k, vs := range h {
			n += len(k) + perString*(2+len(vs))
			for _, v := range vs {
				n += len(v)
			}
		}
	}
	return n
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
// connection, not the response (RFC 9110 §7.6.1), or belong to each
// request (its own Idempotency-Key, its replay mark).
var unkept = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding",
	"Upgrade", "Te", "Trailer", HeaderReplayed, HeaderKey,
}

// write sends resp to w, marked as a replay or not: on top of the headers
// w has (those outer middleware set for this request), it replaces or
// removes those the handler replaced or removed, and adds those it added.
func (resp *response) write(w http.ResponseWriter, replayed bool) {
	h := w.Header()
	for k, vs := range resp.Header {
		if len(vs) == 0 {
			delete(h, k)
			continue
		}
		h[k] = slices.Clone(vs)
	}
	for k, vs := range resp.Append {
		// A new slice: the old one may be outer middleware's.
		h[k] = slices.Concat(h[k], vs)
	}
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(resp.Status)
	if len(resp.Body) > 0 {
		_, _ = w.Write(resp.Body)
	}
}
