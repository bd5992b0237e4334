package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ReplicatedOptions adjust a replicated cluster.
type ReplicatedOptions struct {
	// NodeTimeout is the cluster's cluster-node-timeout: how long a node
	// may be unreachable before its replica is promoted. Default 2.5s,
	// long enough that a loaded machine does not fail over by itself.
	NodeTimeout time.Duration
	// AppendOnly turns on the append-only file with an fsync every second
	// (appendfsync everysec), as production clusters often run.
	AppendOnly bool
}

// ReplicatedCluster is a Redis Cluster whose masters have one replica each.
// Nodes holds every node, masters and replicas, in start order.
type ReplicatedCluster struct {
	Cluster
	NodeTimeout time.Duration
}

// StartReplicatedCluster starts 2×masters nodes (3 masters at least) with
// cluster mode on, joins them with redis-cli --cluster create
// --cluster-replicas 1, and waits until every node reports cluster_state:ok
// and every master has its replica connected.
func StartReplicatedCluster(t TB, masters int, opts ReplicatedOptions) *ReplicatedCluster {
	t.Helper()
	if masters < 3 {
		t.Fatal("redistest: a cluster needs at least 3 masters")
	}
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = 2500 * time.Millisecond
	}
	bin := Binary(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redistest: redis-cli is not on PATH (Debian/Ubuntu: sudo apt-get install -y redis-tools)")
	}
	c := &ReplicatedCluster{NodeTimeout: opts.NodeTimeout}
	node := Options{Args: []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
		// A replica's first sync starts at once, not after the default
		// 5 s wait for more replicas: one that never synced cannot be
		// promoted.
		"--repl-diskless-sync-delay", "0",
	}}
	if opts.AppendOnly {
		node.Args = append(node.Args, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	for range 2 * masters {
		n, err := startOnFreePort(t, bin, true, node)
		if err != nil {
			t.Fatalf("redistest: starting a cluster node: %v", err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK(t)
	c.WaitReplicated(t, 30*time.Second)
	return c
}

// Node is one line of CLUSTER NODES.
type Node struct {
	ID, Addr string
	Master   bool   // a master (else a replica)
	Failed   bool   // flagged fail or fail? by the node asked
	MasterID string // a replica's master
	Slots    [][2]int
}

// Topology returns the cluster as the node at addr sees it.
func Topology(addr string) ([]Node, error) {
	out, err := Command(addr, "CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	var nodes []Node
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := Node{ID: f[0], Addr: strings.SplitN(f[1], "@", 2)[0]}
		flags := f[2]
		n.Master = strings.Contains(flags, "master")
		n.Failed = strings.Contains(flags, "fail")
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being migrated
			}
			lo, hi, found := strings.Cut(s, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if found {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("redistest: bad slot range %q in %q", s, line)
			}
			n.Slots = append(n.Slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// live returns the address of a node that answers, other than skip.
func (c *ReplicatedCluster) live(skip ...*Server) (string, error) {
	var last error
outer:
	for _, n := range c.Nodes {
		for _, s := range skip {
			if s == n {
				continue outer
			}
		}
		if _, err := CommandTimeout(n.Addr, 500*time.Millisecond, "PING"); err != nil {
			last = err
			continue
		}
		return n.Addr, nil
	}
	return "", fmt.Errorf("redistest: no cluster node answers: %v", last)
}

// Server returns the node listening at addr, or nil.
func (c *ReplicatedCluster) Server(addr string) *Server {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// MasterOf returns the node that serves key's slot, as a live node other
// than the ones in skip sees it.
func (c *ReplicatedCluster) MasterOf(key string, skip ...*Server) (*Server, error) {
	addr, err := c.live(skip...)
	if err != nil {
		return nil, err
	}
	s, err := Command(addr, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		return nil, err
	}
	slot, err := strconv.Atoi(s)
	if err != nil {
		return nil, fmt.Errorf("redistest: CLUSTER KEYSLOT %q: %q", key, s)
	}
	nodes, err := Topology(addr)
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if !n.Master || n.Failed {
			continue
		}
		for _, r := range n.Slots {
			if slot >= r[0] && slot <= r[1] {
				if srv := c.Server(n.Addr); srv != nil {
					return srv, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("redistest: no live master serves slot %d of %q", slot, key)
}

// Masters returns the nodes that are masters with slots, as a live node
// sees the cluster.
func (c *ReplicatedCluster) Masters(t TB) []*Server {
	t.Helper()
	addr, err := c.live()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := Topology(addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Server
	for _, n := range nodes {
		if n.Master && !n.Failed && len(n.Slots) > 0 {
			if s := c.Server(n.Addr); s != nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// WaitReplicated waits until every master with slots has a replica that
// has finished its sync (state=online in the master's INFO replication).
func (c *ReplicatedCluster) WaitReplicated(t TB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok := true
		for _, m := range c.Masters(t) {
			info, err := Command(m.Addr, "INFO", "replication")
			if err != nil || !strings.Contains(InfoField(info, "slave0"), "state=online") {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: the masters have no connected replica after %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitPromoted waits until the slots that failed served are served by
// another node (its promoted replica) in the view of every live node, and
// every live node reports cluster_state:ok; it returns that node and how
// long the wait took. Call it soon after the fault, while the other nodes
// still list failed's slots.
func (c *ReplicatedCluster) WaitPromoted(t TB, failed *Server, within time.Duration) (*Server, time.Duration) {
	t.Helper()
	start := time.Now()
	addr, err := c.live(failed)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := Topology(addr)
	if err != nil {
		t.Fatal(err)
	}
	slot := -1
	for _, n := range nodes {
		if n.Addr == failed.Addr && len(n.Slots) > 0 {
			slot = n.Slots[0][0]
		}
	}
	if slot < 0 {
		t.Fatalf("redistest: %s serves no slots in the view of %s", failed.Addr, addr)
	}
	deadline := start.Add(within)
	for {
		if s, ok := c.servedBy(failed, slot); ok {
			return s, time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: slot %d of %s not served by another node within %v", slot, failed.Addr, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// servedBy returns the node that every live node but failed sees serving
// slot, if they agree on one other than failed and report cluster_state:ok.
func (c *ReplicatedCluster) servedBy(failed *Server, slot int) (*Server, bool) {
	var by string
	for _, n := range c.Nodes {
		if n == failed {
			continue
		}
		info, err := CommandTimeout(n.Addr, 300*time.Millisecond, "CLUSTER", "INFO")
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return nil, false
		}
		nodes, err := Topology(n.Addr)
		if err != nil {
			return nil, false
		}
		owner := ""
		for _, x := range nodes {
			if !x.Master || x.Failed {
				continue
			}
			for _, r := range x.Slots {
				if slot >= r[0] && slot <= r[1] {
					owner = x.Addr
				}
			}
		}
		if owner == "" || owner == failed.Addr || (by != "" && owner != by) {
			return nil, false
		}
		by = owner
	}
	s := c.Server(by)
	return s, s != nil
}
