package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
)

// A store with Options.Scope reads the invalidation messages of every
// store on the same prefix as its own keys: those of its scope, a prefix
// within it, or a prefix wider than it (every key of the store); the
// messages about other scopes are not its own.
func TestParseInvalidationWithScope(t *testing.T) {
	s := &Store{scope: store.BuildKey("", store.Scope{Namespace: "acme", Version: "v1"})}
	for _, c := range []struct {
		msg  string
		want store.Invalidation
		ok   bool
	}{
		{invalKey + s.scope + "order-1", store.Invalidation{Key: "order-1"}, true},
		{invalKey + "ff:idemp:other:v1:order-1", store.Invalidation{}, false},
		{invalPrefix + s.scope + "ord", store.Invalidation{Key: "ord", Prefix: true}, true},
		{invalPrefix + "ff:idemp:acme:", store.Invalidation{Prefix: true}, true},
		{invalPrefix, store.Invalidation{Prefix: true}, true},
		{invalPrefix + "ff:idemp:other:", store.Invalidation{}, false},
		{"", store.Invalidation{}, false},
		{"zjunk", store.Invalidation{}, false},
	} {
		got, ok := s.parseInvalidation(c.msg)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %+v %v, want %+v %v", c.msg, got, ok, c.want, c.ok)
		}
	}
}

// A stopped subscription leaves the store: a long-lived Store shared by
// runtimes that come and go (each subscribes to wake-ups and to
// invalidations at New, and stops both at Close) must not keep every
// PubSub it ever made until the Store is closed.
func TestStoppedSubscriptionsLeaveTheStore(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	s, err := New(ctx, c, Options{KeyPrefix: "subs:"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for range 5 {
		stopInval, err := s.SubscribeInvalidations(ctx, func(store.Invalidation) {})
		if err != nil {
			t.Fatal(err)
		}
		_, stopWake, err := s.Subscribe(ctx, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		stopInval()
		stopWake()
	}
	s.mu.Lock()
	n := len(s.subs)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("the store keeps %d stopped subscriptions", n)
	}
}
