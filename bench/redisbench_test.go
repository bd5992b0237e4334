package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
)

// redis-benchmark's keys are deleted after it; the other keys stay.
func TestUnlinkMatching(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer client.Close()
	for i := range 2500 {
		client.Set(ctx, fmt.Sprintf("rb:{%d}", i), "x", 0)
	}
	client.Set(ctx, "bench:keep", "x", 0)
	if err := unlinkMatching(ctx, client, redisBenchKeys); err != nil {
		t.Fatal(err)
	}
	if n, err := client.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("%d keys left (%v)", n, err)
	}
}

// redis-benchmark runs only for idem's unique run on Redis.
func TestRedisBenchmarkNeedsUniqueIdem(t *testing.T) {
	for _, cfg := range []Config{
		{RedisAddrs: []string{"127.0.0.1:1"}, Store: "redis", RedisBench: true, Scenarios: []string{"storm"}, Systems: []string{"idem"}},
		{RedisAddrs: []string{"127.0.0.1:1"}, Store: "redis", RedisBench: true, Scenarios: []string{"unique"}, Systems: []string{"plain"}},
		{Store: "memory", RedisBench: true, Scenarios: []string{"unique"}, Systems: []string{"idem"}},
	} {
		if rb := redisBenchmark(context.Background(), &env{cfg: cfg}); rb != nil {
			t.Errorf("%+v: ran: %+v", cfg, rb)
		}
	}
}
