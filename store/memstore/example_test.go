package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

func ExampleNew() {
	ctx := context.Background()
	s := memstore.New(memstore.Options{MaxRecords: 100000})
	defer s.Close()

	res, _ := s.Claim(ctx, "k", store.ClaimRequest{Owner: "worker-1", Lease: time.Minute, TTL: time.Hour})
	fmt.Println(res.Status)
	dup, _ := s.Claim(ctx, "k", store.ClaimRequest{Owner: "worker-2", Lease: time.Minute, TTL: time.Hour})
	fmt.Println(dup.Status)
	_, _ = s.Complete(ctx, "k", res.Token, store.Record{Value: []byte(`"done"`)}, time.Hour)
	later, _ := s.Claim(ctx, "k", store.ClaimRequest{Owner: "worker-3", Lease: time.Minute, TTL: time.Hour})
	fmt.Println(later.Status, string(later.Record.Value))
	// Output:
	// claimed
	// in-progress
	// completed "done"
}
