package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
	"github.com/idemrt/idem/store/storetest"
)

// startReplicated starts a server and a replica of it, and waits until the
// replica has synced and acknowledges writes (WAIT answers 1).
func startReplicated(t *testing.T) (primary, replica *redistest.Server) {
	primary = redistest.Start(t, redistest.Options{Args: []string{"--repl-diskless-sync-delay", "0"}})
	replica = redistest.Start(t, redistest.Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}})
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := redistest.Command(primary.Addr, "INFO", "replication")
		if err == nil && strings.Contains(redistest.InfoField(info, "slave0"), "state=online") {
			_, err = redistest.Command(primary.Addr, "SET", "sync", "1")
			if n, _ := redistest.Command(primary.Addr, "WAIT", "1", "100"); err == nil && n == "1" {
				return primary, replica
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not sync: %v %q", err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The contract holds when every write waits for a replica.
func TestConformanceWaitReplicas(t *testing.T) {
	t.Parallel()
	primary, _ := startReplicated(t)
	client := newClient(t, primary)
	h := harness(client)
	h.New = func(t testing.TB) store.Store {
		s, err := redisstore.New(context.Background(), client, redisstore.Options{
			// A replica on a loaded machine may take longer than the
			// default 250ms to confirm: the contract, not the speed, is
			// checked here.
			KeyPrefix: fmt.Sprintf("w%d:", prefixSeq.Add(1)), WaitReplicas: 1, WaitTimeout: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	storetest.Run(t, h)
}

// With its replica gone, a master's writes are unconfirmed: a claim
// answers ErrUnconfirmed and leaves the key free, a completion answers
// ErrUnconfirmed and is taken once the replica is back.
func TestWaitReplicasUnconfirmed(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	primary, replica := startReplicated(t)
	client := newClient(t, primary)
	s, err := redisstore.New(bg, client, redisstore.Options{KeyPrefix: "u:", WaitReplicas: 1, WaitTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := store.ClaimRequest{Owner: "a", Lease: time.Minute, TTL: time.Hour}
	// A replica that has just synced may still be slow to acknowledge on
	// a loaded machine: an unconfirmed claim is released, so it is
	// claimed again until one is confirmed.
	var res store.ClaimResult
	for range 20 {
		if res, err = s.Claim(bg, "k1", req); !errors.Is(err, redisstore.ErrUnconfirmed) {
			break
		}
	}
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("claim with a replica: %+v, %v", res, err)
	}
	replica.Pause()
	defer replica.Resume()
	if _, err := s.Complete(bg, "k1", res.Token, store.Record{Value: []byte("v")}, time.Hour); !errors.Is(err, redisstore.ErrUnconfirmed) || !store.Retryable(err) {
		t.Fatalf("complete without a replica: %v, want a retryable ErrUnconfirmed", err)
	}
	if _, err := s.Claim(bg, "k2", req); !errors.Is(err, redisstore.ErrUnconfirmed) {
		t.Fatalf("claim without a replica: %v, want ErrUnconfirmed", err)
	}
	// The unconfirmed claim was released: another owner claims k2 at once.
	plain, err := redisstore.New(bg, client, redisstore.Options{KeyPrefix: "u:"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if res, err := plain.Claim(bg, "k2", store.ClaimRequest{Owner: "b", Lease: time.Minute, TTL: time.Hour}); err != nil || res.Status != store.Claimed {
		t.Fatalf("k2 after its unconfirmed claim: %+v, %v; want it free", res, err)
	}
	if st := s.Stats(); st.Unconfirmed < 2 {
		t.Fatalf("Stats %+v: want 2 unconfirmed writes at least", st)
	}
	replica.Resume()
	var rec store.Record
	for range 100 {
		if rec, err = s.Complete(bg, "k1", res.Token, store.Record{Value: []byte("v")}, time.Hour); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || string(rec.Value) != "v" {
		t.Fatalf("complete once the replica is back: %q, %v", rec.Value, err)
	}
}

func TestWaitTimeoutBelowReadTimeout(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: time.Second})
	defer c.Close()
	_, err := redisstore.New(context.Background(), c, redisstore.Options{WaitReplicas: 1, WaitTimeout: time.Second})
	if !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("WaitTimeout = ReadTimeout: %v, want ErrInvalidArgument", err)
	}
}
