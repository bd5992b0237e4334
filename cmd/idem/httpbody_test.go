package main

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	idemrt "github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// An HTTP body cut past 4 KiB is shown as text only when what is shown is
// the body's own text: a body that is not UTF-8 before the cut is base64,
// not text with its bad bytes dropped.
func TestHTTPBodyCut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		text       bool
	}{
		{"latin-1", "caf\xe9 " + strings.Repeat("a", 5000), false},
		{"utf-8 cut in a rune", "x" + strings.Repeat("é", 3000), true},
	} {
		rep := asHTTP(encodeResponse(t, tc.body), false)
		if rep == nil || !rep.BodyCut {
			t.Fatalf("%s: %+v", tc.name, rep)
		}
		var shown []byte
		switch {
		case rep.Body != nil && tc.text:
			shown = []byte(*rep.Body)
		case rep.BodyBase64 != nil && !tc.text:
			shown, _ = base64.StdEncoding.DecodeString(*rep.BodyBase64)
		default:
			t.Errorf("%s: body %v, base64 %v; want text %v", tc.name, rep.Body != nil, rep.BodyBase64 != nil, tc.text)
			continue
		}
		if len(shown) < bodyShown-utf8.UTFMax || !strings.HasPrefix(tc.body, string(shown)) {
			t.Errorf("%s: shown %d bytes that do not start the body: %.40q", tc.name, len(shown), shown)
		}
	}
}

// encodeResponse is body as httpidem stores a response.
func encodeResponse(t *testing.T, body string) []byte {
	t.Helper()
	mem := memstore.New(memstore.Options{})
	t.Cleanup(func() { mem.Close() })
	rt := idemtest.Runtime(t, idemrt.Options{Store: mem})
	mw, err := httpidem.New(httpidem.Options{Runtime: rt, SharedScope: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mw.Close(bg) })
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	req := httptest.NewRequest("POST", "/pay", strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "k")
	h.ServeHTTP(httptest.NewRecorder(), req)
	var value []byte
	keys, _, err := mem.Scan(bg, "", "", 10)
	if err != nil || len(keys) != 1 {
		t.Fatalf("stored keys %q: %v", keys, err)
	}
	for _, k := range keys {
		e, err := mem.Inspect(bg, k)
		if err != nil {
			t.Fatal(err)
		}
		value = e.Record.Value
	}
	return value
}
