package pgstore_test

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// Keys are bytes: every byte the contract allows in a key (all but NUL),
// invalid UTF-8 and the longest key come back unchanged from Scan, and
// hold binary values of any size, which come back unchanged too.
func TestArbitraryKeysAndValues(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(n int, nonzero bool) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
			for nonzero && b[i] == 0 {
				b[i] = byte(rng.IntN(256))
			}
		}
		return b
	}
	var keys []string
	for c := 1; c < 256; c++ {
		keys = append(keys, string([]byte{byte(c)}), "p"+string([]byte{byte(c)}))
	}
	keys = append(keys, "\xff\xfe\xfd", "\xc3\x28", "a\xffb", strings.Repeat("\xff", store.MaxKeyLen),
		string(random(store.MaxKeyLen, true)), "'; DROP TABLE x; --", `\x41`, "%_*?[]{}")
	for range 20 {
		keys = append(keys, string(random(1+rng.IntN(64), true)))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	values := map[string][]byte{}
	for i, key := range keys {
		v := random(rng.IntN(300), false)
		if i == 0 {
			v = random(1<<20, false) // a megabyte
		}
		values[key] = v
		tok := claimKey(t, s, key, "o")
		fp := random(32, false)
		rec, err := s.Complete(bg, key, tok, store.Record{Value: v, Fingerprint: fp}, time.Hour)
		if err != nil || !bytes.Equal(rec.Value, v) || !bytes.Equal(rec.Fingerprint, fp) {
			t.Fatalf("Complete(%q): %v", key, err)
		}
	}
	for _, key := range keys {
		rec, err := s.Get(bg, key)
		if err != nil || !bytes.Equal(rec.Value, values[key]) {
			t.Fatalf("Get(%q) = %d bytes, %v; want the %d bytes stored", key, len(rec.Value), err, len(values[key]))
		}
		if e, err := s.Inspect(bg, key); err != nil || e.State != store.Done || !bytes.Equal(e.Record.Value, values[key]) {
			t.Fatalf("Inspect(%q) = %v %v", key, e.State, err)
		}
	}
	var scanned []string
	cursor := ""
	for {
		page, next, err := s.Scan(bg, "", cursor, 37)
		if err != nil {
			t.Fatal(err)
		}
		scanned = append(scanned, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(scanned, keys) {
		t.Fatalf("Scan returned %d keys, want the %d stored, in byte order", len(scanned), len(keys))
	}
	for _, prefix := range []string{"p", "\xff", "\xff\xff", "p\xff"} {
		page, _, err := s.Scan(bg, prefix, "", 10000)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		if !slices.Equal(page, want) {
			t.Fatalf("Scan(%q) = %d keys, want %d", prefix, len(page), len(want))
		}
	}
}
