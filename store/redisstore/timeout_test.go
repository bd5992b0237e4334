package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
)

// lockedBuffer is a log destination safe for the runtime's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A runtime whose StoreTimeout is shorter than what its go-redis client
// lets a read take (no ContextTimeoutEnabled, ReadTimeout 5s) says so at
// start; with ContextTimeoutEnabled it does not, and a call on a stalled
// Redis fails on StoreTimeout, not on the client's ReadTimeout.
func TestStoreTimeoutShorterThanClientRead(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	for _, tc := range []struct {
		name  string
		ctxOn bool
		warn  bool
	}{{"default client", false, true}, {"ContextTimeoutEnabled", true, false}} {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: tc.ctxOn})
		t.Cleanup(func() { c.Close() })
		st := newStore(t, c)
		var logs lockedBuffer
		rt := idemtest.Runtime(t, idem.Options{Store: st, StoreTimeout: 500 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if got := strings.Contains(logs.String(), "does not apply StoreTimeout"); got != tc.warn {
			t.Fatalf("%s: warned %v, want %v; log:\n%s", tc.name, got, tc.warn, logs.String())
		}
		if !tc.ctxOn {
			continue
		}
		srv.Pause()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := idem.Do(ctx, rt, "stalled", idemtest.Value("v"))
		took := time.Since(start)
		cancel()
		srv.Resume()
		if !errors.Is(err, idem.ErrStoreUnavailable) {
			t.Fatalf("%s: Do on a paused Redis: %v, want ErrStoreUnavailable", tc.name, err)
		}
		// The client's own ReadTimeout is 5s: a failure well before it
		// came from StoreTimeout.
		if took >= 4*time.Second {
			t.Fatalf("%s: Do failed after %v, want StoreTimeout (500ms) to bound it", tc.name, took)
		}
	}
}
