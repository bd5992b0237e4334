package idem

import "encoding/json"

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
