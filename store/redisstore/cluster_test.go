package redisstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

// Partition numbers a cluster's masters: keys of one master share a
// number, keys of different masters do not; any other client has one
// partition.
func TestPartitionByMaster(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	cl := redistest.StartCluster(t, 3)
	cc := newClusterClient(t, cl)
	s, err := redisstore.New(bg, cc, redisstore.Options{KeyPrefix: "p:"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	byPart := map[int]string{}
	for i := range 200 {
		key := fmt.Sprint("k", i)
		n, err := cc.MasterForKey(bg, s.RecordKey(key))
		if err != nil {
			t.Fatal(err)
		}
		p, addr := s.Partition(key), n.Options().Addr
		if a, ok := byPart[p]; ok && a != addr {
			t.Fatalf("partition %d holds keys of %s and %s", p, a, addr)
		}
		byPart[p] = addr
	}
	if len(byPart) != 3 {
		t.Fatalf("%d partitions for 3 masters: %v", len(byPart), byPart)
	}
	single, err := redisstore.New(bg, newClient(t, redistest.Start(t, redistest.Options{})), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if p := single.Partition("k1"); p != 0 {
		t.Fatalf("a single node's partition %d, want 0", p)
	}
}
