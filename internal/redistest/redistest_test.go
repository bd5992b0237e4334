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
