package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// BenchmarkClaimComplete measures the store's part of one execution: a claim
// and a complete of a new key.
func BenchmarkClaimComplete(b *testing.B) {
	s := memstore.New(memstore.Options{})
	ctx := context.Background()
	val := []byte(`{"ID":"r-1","Amount":4200}`)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		key := "order-" + strconv.Itoa(i)
		res, err := s.Claim(ctx, key, store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Complete(ctx, key, res.Token, store.Record{Value: val}, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}
