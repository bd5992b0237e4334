package redistest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
)

func TestServerLifecycle(t *testing.T) {
	s := redistest.Start(t, redistest.Options{Persist: true})
	if _, err := redistest.Command(s.Addr, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	if _, err := redistest.CommandTimeout(s.Addr, 300*time.Millisecond, "PING"); err == nil {
		t.Fatal("a paused server answered")
	}
	s.Resume()
	if got, err := redistest.Command(s.Addr, "GET", "k"); err != nil || got != "v" {
		t.Fatalf("after resume: %q %v", got, err)
	}
	s.Kill()
	if _, err := redistest.Command(s.Addr, "PING"); err == nil {
		t.Fatal("a killed server answered")
	}
	s.Restart()
	if got, err := redistest.Command(s.Addr, "GET", "k"); err != nil || got != "v" {
		t.Fatalf("after restart with persistence: %q %v", got, err)
	}
}

func TestRestartWithoutPersistenceIsEmpty(t *testing.T) {
	s := redistest.Start(t, redistest.Options{})
	if _, err := redistest.Command(s.Addr, "SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if got, err := redistest.Command(s.Addr, "EXISTS", "k"); err != nil || got != "0" {
		t.Fatalf("EXISTS after restart = %q %v, want 0", got, err)
	}
}

func TestCluster(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, 3)
	t.Logf("cluster ready in %v", time.Since(start))
	if len(c.Addrs()) != 3 {
		t.Fatal(c.Addrs())
	}
	for _, a := range c.Addrs() {
		info, err := redistest.Command(a, "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
			t.Fatalf("node %s: %v %q", a, err, info)
		}
	}
}

func TestReplicatedClusterFailsOver(t *testing.T) {
	start := time.Now()
	c := redistest.StartReplicatedCluster(t, 3, redistest.ReplicatedOptions{})
	t.Logf("replicated cluster ready in %v", time.Since(start))
	if len(c.Nodes) != 6 || len(c.Masters(t)) != 3 {
		t.Fatalf("%d nodes, %d masters", len(c.Nodes), len(c.Masters(t)))
	}
	m, err := c.MasterOf("order-1")
	if err != nil {
		t.Fatal(err)
	}
	m.Kill()
	next, took := c.WaitPromoted(t, m, 30*time.Second)
	t.Logf("replica %s promoted %v after the kill", next.Addr, took)
	now, err := c.MasterOf("order-1", m)
	if err != nil || now != next {
		t.Fatalf("order-1 is served by %v (%v), want the promoted %s", now, err, next.Addr)
	}
	// The promoted node takes writes for the failed master's slots. (What
	// a failover keeps of earlier writes is for the stores' own failover
	// tests: store/redisstore/failover_test.go.)
	if _, err := redistest.Command(next.Addr, "SET", "order-1", "v2"); err != nil {
		t.Fatalf("SET on the promoted replica: %v", err)
	}
}
