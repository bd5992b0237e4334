package idem

import (
	"bytes"
	"encoding/json"
	"sync"
)

// Codec turns results into the bytes a store keeps, and back.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the default codec, encoding/json.
//
// What encoding/json changes comes back changed when a result is replayed
// from the store, though the owner (and callers in its process while the
// result is cached) got the value the function returned: each byte of a
// string that is not valid UTF-8 becomes U+FFFD, and unexported fields are
// dropped. Return binary data as []byte. A NaN or infinite float, or a
// time outside years 0 to 9999, does not encode at all (a *CodecError).
var JSON Codec = jsonCodec{}

type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

// encoded is a result encoded by the JSON codec into a pooled buffer, for
// a store that copies what it keeps (memstore): the encoding's own copy
// is then one allocation too many. Give it back with release once nothing
// refers to its bytes.
type encoded struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encodings = sync.Pool{New: func() any {
	e := new(encoded)
	e.enc = json.NewEncoder(&e.buf)
	return e
}}

// maxPooledEncoding is the largest buffer kept for reuse.
const maxPooledEncoding = 64 << 10

// encode encodes v with codec. With borrow set and the JSON codec, the
// bytes are in a pooled buffer that the caller releases (e is not nil);
// otherwise they are the caller's.
func encode(codec Codec, v any, borrow bool) (data []byte, e *encoded, err error) {
	if !borrow || codec != JSON {
		data, err = codec.Marshal(v)
		return data, nil, err
	}
	e = encodings.Get().(*encoded)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, nil, err // e is dropped: an Encoder's errors can stick
	}
	// Encode is Marshal followed by a newline.
	return bytes.TrimSuffix(e.buf.Bytes(), []byte{'\n'}), e, nil
}

// release gives the buffer back; its bytes must not be used after.
func (e *encoded) release() {
	if e.buf.Cap() <= maxPooledEncoding {
		encodings.Put(e)
	}
}
