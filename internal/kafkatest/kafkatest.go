// Package kafkatest starts in-process Kafka clusters (kfake) for tests:
// brokers that listen on free loopback ports, so other processes (a
// re-executed test binary) can join them, with group session timeouts
// short enough for a test to see a member die.
package kafkatest

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Cluster is a running in-process cluster.
type Cluster struct {
	*kfake.Cluster
	// Addrs are the brokers' host:port addresses.
	Addrs []string
}

// MinSessionTimeout is the shortest group session timeout the clusters
// accept.
const MinSessionTimeout = 100 * time.Millisecond

// Start starts a one-broker cluster with topics of partitions partitions
// each, closed at the end of the test.
func Start(t testing.TB, partitions int32, topics ...string) *Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.GroupMinSessionTimeout(MinSessionTimeout)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kafkatest: %v", err)
	}
	t.Cleanup(c.Close)
	return &Cluster{Cluster: c, Addrs: c.ListenAddrs()}
}

// GroupOpts are the client options of a test's group member: the
// cluster's brokers, short session and rebalance timeouts, fetches that
// come back quickly, records read from the start.
func GroupOpts(addrs []string) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(addrs...),
		kgo.SessionTimeout(time.Second),
		kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.RebalanceTimeout(3 * time.Second),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}
