package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/redisstore"
)

// faultClient fails fast while the server is away, so tests do not wait on
// go-redis's long default timeouts.
func faultClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 300 * time.Millisecond,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

// faultStore returns a store on srv through a faultClient.
func faultStore(t testing.TB, srv *redistest.Server) *redisstore.Store {
	s, err := redisstore.New(bg, faultClient(t, srv.Addr), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Redis is restarted (with every write fsynced) in the middle of a run;
// see storesuite.RestartMidRun. A quick restart may go unnoticed.
func TestRedisRestartMidRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{Persist: true})
	rt := newRuntime(t, idem.Options{Store: faultStore(t, srv), Policy: idem.Policy{Lease: 2 * time.Second, Settle: 5 * time.Second}, StoreTimeout: time.Second})
	storesuite.RestartMidRun(t, rt, srv.Restart, false)
}

// Redis is paused (SIGSTOP) past the callers' deadlines; see
// storesuite.Paused.
func TestRedisPaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	rt := newRuntime(t, idem.Options{Store: faultStore(t, srv), StoreTimeout: time.Second})
	storesuite.Paused(t, rt, srv)
}

// Redis goes away for longer than the lease while fn runs, paused or
// killed and started again (with every write fsynced, so the claim is
// still there); see storesuite.OutageLongerThanLease. A server that comes
// back without the claim (no persistence) would refuse the late result
// with ErrLeaseLost, and the key would run again: an outage keeps a key
// to one run only on a store that keeps what it acknowledged.
func TestRedisOutageLongerThanLease(t *testing.T) {
	const lease = time.Second
	for _, c := range []struct {
		name    string
		persist bool
		outage  func(*redistest.Server) storesuite.Outage
	}{
		{"paused", false, func(srv *redistest.Server) storesuite.Outage {
			return storesuite.Outage{Down: srv.Pause, Up: srv.Resume}
		}},
		{"restarted", true, func(srv *redistest.Server) storesuite.Outage {
			return storesuite.Outage{Down: srv.Kill, Up: srv.Restart}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Options{Persist: c.persist})
			rt := newRuntime(t, idem.Options{Store: faultStore(t, srv),
				Policy: idem.Policy{Lease: lease, TTL: time.Hour}, StoreTimeout: time.Second})
			storesuite.OutageLongerThanLease(t, rt, lease, c.outage(srv), func() *idem.Runtime {
				return newRuntime(t, idem.Options{Store: faultStore(t, srv)})
			})
		})
	}
}

// Redis is paused for 20s while an owner runs, with default settings (a
// lease of 60s, early takeover on): nobody takes its key over, though its
// liveness record ended in the pause; see storesuite.OutageKeepsLiveOwner.
func TestRedisOutageKeepsLiveOwner(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("o%d:", prefixSeq.Add(1))
	a := newRuntime(t, idem.Options{Store: newStoreWithPrefix(t, newClient(t, srv), prefix)})
	b := newRuntime(t, idem.Options{Store: newStoreWithPrefix(t, newClient(t, srv), prefix)})
	storesuite.OutageKeepsLiveOwner(t, a, b, storesuite.Outage{Down: srv.Pause, Up: srv.Resume})
}
