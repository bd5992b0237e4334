package memstore_test

import (
	"context"
	"fmt"
	"slices"
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

func ExampleStore_Inspect() {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	defer s.Close()

	e, _ := s.Inspect(ctx, "k")
	fmt.Println(e.State)
	res, _ := s.Claim(ctx, "k", store.ClaimRequest{Owner: "worker-1", Lease: time.Minute, TTL: time.Hour})
	e, _ = s.Inspect(ctx, "k")
	fmt.Println(e.State, e.Token.Owner, e.LeaseLeft <= time.Minute)
	_, _ = s.Complete(ctx, "k", res.Token, store.Record{Value: []byte(`"done"`)}, time.Hour)
	e, _ = s.Inspect(ctx, "k")
	fmt.Println(e.State, string(e.Record.Value))
	// Output:
	// absent
	// in-progress worker-1 true
	// completed "done"
}

func ExampleStore_Scan() {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	defer s.Close()
	for _, key := range []string{"orders:1", "orders:2", "orders:3", "users:1"} {
		_, _ = s.Claim(ctx, key, store.ClaimRequest{Owner: "worker-1", Lease: time.Minute, TTL: time.Hour})
	}

	// Page through the keys that start with "orders:", two at a time at
	// most, until the cursor comes back empty.
	var keys []string
	cursor := ""
	for {
		page, next, err := s.Scan(ctx, "orders:", cursor, 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		keys = append(keys, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(keys) // a scan's order is the store's own
	fmt.Println(keys)
	// Output: [orders:1 orders:2 orders:3]
}

// Every runtime that shares the Store hears what a Forget deleted and what
// a Clear's scope was (idem.New subscribes by itself); here a plain
// subscriber prints them.
func ExampleStore_SubscribeInvalidations() {
	ctx := context.Background()
	s := memstore.New(memstore.Options{})
	defer s.Close()

	stop, _ := s.SubscribeInvalidations(ctx, func(inv store.Invalidation) {
		fmt.Printf("key %q prefix %v\n", inv.Key, inv.Prefix)
	})
	defer stop()
	res, _ := s.Claim(ctx, "k", store.ClaimRequest{Owner: "worker-1", Lease: time.Minute, TTL: time.Hour})
	_, _ = s.Complete(ctx, "k", res.Token, store.Record{Value: []byte(`"done"`)}, time.Hour)
	_ = s.Forget(ctx, "k")
	_ = s.InvalidatePrefix(ctx, "ff:idemp:acme:")
	// Output:
	// key "k" prefix false
	// key "ff:idemp:acme:" prefix true
}
