package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

// A store on a Sentinel-managed master (redis.NewFailoverClient) serves
// new keys again soon after the master is killed and Sentinel promotes its
// replica, and every call gets its own key's value.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a Sentinel failover")
	}
	t.Parallel()
	bg := context.Background()
	primary, _ := startReplicated(t)
	sentinel := redistest.StartSentinel(t, primary, "idem", time.Second)
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr})
	defer sc.Close()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if rs, err := sc.Replicas(bg, "idem").Result(); err == nil && len(rs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Sentinel found no replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
	client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "idem", SentinelAddrs: []string{sentinel.Addr}})
	defer client.Close()
	s, err := redisstore.New(bg, client, redisstore.Options{KeyPrefix: "s:"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rt, err := idem.New(idem.Options{Store: s, Policy: idem.Policy{Lease: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(bg)
	call := func(i int) error {
		ctx, cancel := context.WithTimeout(bg, 2*time.Second)
		defer cancel()
		key := fmt.Sprint("k", i)
		v, err := idem.Do(ctx, rt, key, func(context.Context) (string, error) { return "v" + key, nil })
		if err == nil && v != "v"+key {
			t.Fatalf("key %s got %q", key, v)
		}
		return err
	}
	for i := range 20 {
		if err := call(i); err != nil {
			t.Fatalf("before the failover: %v", err)
		}
	}
	primary.Kill()
	killed := time.Now()
	for i := 20; ; i++ {
		if call(i) == nil {
			t.Logf("new keys served again %v after the master was killed (Sentinel down-after 1s)", time.Since(killed).Round(time.Millisecond))
			return
		}
		if time.Since(killed) > 30*time.Second {
			t.Fatal("no new key served within 30s of the kill")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
