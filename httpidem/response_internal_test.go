package httpidem

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// storedSize is an upper bound of what gobCodec makes of a response, so
// that a response it lets through is never over the runtime's limit.
func TestStoredSizeBoundsTheEncoding(t *testing.T) {
	many := http.Header{}
	for i := range 2000 {
		many.Add("X-"+strconv.Itoa(i), "")
		many.Add("X-"+strconv.Itoa(i), "v")
	}
	for name, r := range map[string]*response{
		"empty":          {},
		"body":           {Status: 201, Body: []byte(strings.Repeat("b", 100_000))},
		"many headers":   {Status: 599, Header: many, Append: many},
		"long values":    {Status: 200, Header: http.Header{"A": {strings.Repeat("\xff", 300_000)}}},
		"empty values":   {Status: 200, Header: http.Header{"": {"", "", ""}}},
		"trailers alone": {Status: 204, Append: http.Header{"T": {"x"}}},
	} {
		data, err := gobCodec{}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > r.storedSize() {
			t.Errorf("%s: %d bytes encoded, over storedSize %d", name, len(data), r.storedSize())
		}
	}
}
