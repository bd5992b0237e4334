package httpidem

import (
	"bytes"
	"encoding/gob"
	"net/http"
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
// connection, not the response (RFC 9110 §7.6.1), or belong to each
// request (its own Idempotency-Key, its replay mark).
var unkept = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding",
	"Upgrade", "Te", "Trailer", HeaderReplayed, HeaderKey,
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
