package idem_test

// Tests of bugs an adversarial review of the rewritten engine found, each
// fixed since: they keep them fixed.

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// prefixCodec is JSON behind a marker byte: bytes it wrote are not JSON.
type prefixCodec struct{}

func (prefixCodec) Marshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append([]byte("#"), b...), err
}

func (prefixCodec) Unmarshal(d []byte, v any) error {
	if len(d) == 0 || d[0] != '#' {
		return errors.New("prefixCodec: not mine")
	}
	return json.Unmarshal(d[1:], v)
}

// Found in review (fixed: the LRU keeps the owner's codec): the LRU keeps only the owner's value (Cached.one), and a
// caller of another type re-encodes it with its own codec (do.go result).
// When that codec is not the one the owner stored the result with, the
// LRU's answer differs from the store's: here the store's bytes cannot be
// read with JSON (a *CodecError from every other process, and from this
// one once the LRU lets the result go), but the LRU hands the caller a
// value. Replays must not depend on whether the result is cached.
func TestCachedReplayDecodesAsTheStoreWould(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		ctx := context.Background()
		ms := memStore(nil)
		cached := idemtest.Runtime(t, idem.Options{Store: wrap(ms), CacheEntries: 16})
		plain := idemtest.Runtime(t, idem.Options{Store: wrap(ms)})
		if _, err := idem.Do(ctx, cached, "k", func(context.Context) (int, error) { return 7, nil },
			idem.WithCodec(prefixCodec{})); err != nil {
			t.Fatal(err)
		}
		_, fromStore := idem.Get[float64](ctx, plain, "k")
		var ce *idem.CodecError
		if !errors.As(fromStore, &ce) {
			t.Fatalf("store replay: %v, want a *CodecError", fromStore)
		}
		v, fromLRU := idem.Get[float64](ctx, cached, "k")
		if !errors.As(fromLRU, &ce) {
			t.Fatalf("LRU replay: %v, %v; the store's replay: %v", v, fromLRU, fromStore)
		}
	})
}
