package redisstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// The scripts' parse (Lua) and decodeValue (Go) read record values alike:
// a value one finds corrupt, the other does too, so no script acts on a
// record the client would refuse to read, or the reverse. Forget's script
// parses the value and writes only when it is a completed record, so
// whether it answers corrupt is the Lua side's verdict. The values are
// valid records of each state and layout and random mutations of them.
func TestScriptsAndDecoderReadValuesAlike(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	s, err := New(ctx, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	valid := []packed{
		{layout: layout3, state: 'p', fence: 1, ms: 86_340_000, owner: []byte("0123456789abcdef-1a2b"), fp: []byte("fp")},
		{layout: layout3, state: 'p', waiters: true, fence: 12, owner: []byte("o"), fp: nil},
		{layout: layout3, state: 'c', fence: 3, ms: 3_600_000, owner: []byte("owner-1"), fp: []byte("fp"), result: []byte(`{"id":42}`)},
		{layout: layout3, state: 'f', fence: 1 << 53, ms: 1, owner: []byte("o:w"), result: []byte("card declined")},
		{layout: layout3, state: 'r', fence: 4, owner: []byte("o")},
		{layout: layout4, state: 'p', fence: 60_566_400_000_000, attempt: 1, ms: 86_340_000, owner: []byte("0123456789abcdef-1a2b"), fp: []byte("fp")},
		{layout: layout4, state: 'p', waiters: true, fence: 1 << 53, attempt: 12, owner: []byte("o")},
		{layout: layout4, state: 'r', fence: 4, attempt: 1 << 53, owner: []byte("o")},
	}
	values := [][]byte{[]byte("3"), []byte("3p0"), []byte("3c01:1:o1:0"), []byte("3p01:1:o00:0:"), []byte("3p01:1:o9007199254740993:0:"),
		[]byte("3p01:01:o0:0:"), []byte("3p01:1:o0:01:f"), []byte("4"), []byte("4p01:1:o0:0:"), []byte("4p01:1:o0:0:0:"),
		[]byte("4p01:1:o01:0:0:"), []byte("4c01:1:o1:1:0:v"), []byte("4f01:1:o1:1:0:"), []byte("4p01:1:o1:0:0:x"),
		[]byte("4r01:1:o9007199254740993:0:0:"), []byte("4p01:1:o1:0:0")}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range valid {
		v := p.encode()
		values = append(values, v)
		for range 60 {
			m := append([]byte(nil), v...)
			switch i := rng.IntN(len(m)); rng.IntN(3) {
			case 0:
				m[i] = "0123456789:34pcfrx"[rng.IntN(18)]
			case 1:
				m = append(m[:i], m[i+1:]...)
			default:
				m = append(m[:i], append([]byte{"0123456789:"[rng.IntN(11)]}, m[i:]...)...)
			}
			values = append(values, m)
		}
	}
	for i, v := range values {
		key := "k" + string(rune('a'+i%26)) + time.Duration(i).String()
		if err := c.Set(ctx, s.RecordKey(key), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		_, goErr := decodeValue(v)
		luaErr := s.Forget(ctx, key)
		if errors.Is(luaErr, store.ErrInProgress) {
			luaErr = nil
		}
		if (goErr == nil) != (luaErr == nil) {
			t.Errorf("value %q: decodeValue %v, the scripts %v", v, goErr, luaErr)
		}
	}
}
