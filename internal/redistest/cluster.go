package redistest

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns the addresses of the cluster's nodes.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartCluster starts masters nodes (3 at least) with cluster mode on, joins
// them with redis-cli --cluster create, and waits until every node reports
// cluster_state:ok. Their cluster bus ports (port+10000) are free too.
func StartCluster(t TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatal("redistest: a cluster needs at least 3 masters")
	}
	bin := Binary(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redistest: redis-cli is not on PATH (Debian/Ubuntu: sudo apt-get install -y redis-tools)")
	}
	c := &Cluster{}
	node := Options{Args: []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000",
	}}
	for range masters {
		n, err := startOnFreePort(t, bin, true, node)
		if err != nil {
			t.Fatalf("redistest: starting a cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK(t)
	return c
}

// waitOK waits until every node reports cluster_state:ok, for 30s at most.
func (c *Cluster) waitOK(t TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := Command(n.Addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: node %s not cluster_state:ok after 30s: %v %q", n.Addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
