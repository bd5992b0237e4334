package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

func ExampleBuildKey() {
	fmt.Println(store.BuildKey("order-1234", store.Scope{Namespace: "tenant-a", Version: "2.0.0"}))
	// A ':' in the namespace is escaped, so these two never collide:
	fmt.Println(store.BuildKey("b:c", store.Scope{Namespace: "a"}))
	fmt.Println(store.BuildKey("c", store.Scope{Namespace: "a:b"}))
	// Output:
	// ff:idemp:tenant-a:2.0.0:order-1234
	// ff:idemp:a::b:c
	// ff:idemp:a%3Ab::c
}

func ExampleParseKey() {
	key, scope, ok := store.ParseKey("ff:idemp:a%3Ab:v1:order:1")
	fmt.Printf("%q %q %q %v\n", key, scope.Namespace, scope.Version, ok)
	_, _, ok = store.ParseKey("not-a-scoped-key")
	fmt.Println(ok)
	// Output:
	// "order:1" "a:b" "v1" true
	// false
}

func ExampleValidateKey() {
	fmt.Println(store.ValidateKey("order-1"))
	for _, bad := range []string{"", strings.Repeat("x", 1025), "a\x00b"} {
		fmt.Println(errors.Is(store.ValidateKey(bad), store.ErrInvalidKey))
	}
	// Output:
	// <nil>
	// true
	// true
	// true
}

func ExampleRun() {
	// Run a batch against any store: as one round trip if it implements
	// Batcher (Redis), else one operation at a time. Results land in each Op.
	st := memstore.New(memstore.Options{})
	ctx := context.Background()
	ops := []*store.Op{
		{Kind: store.OpClaim, Key: "a", Claim: store.ClaimRequest{Owner: "w1", Lease: time.Minute, TTL: time.Hour}},
		{Kind: store.OpClaim, Key: "a", Claim: store.ClaimRequest{Owner: "w2", Lease: time.Minute, TTL: time.Hour}},
		{Kind: store.OpGet, Key: "b"},
	}
	store.Run(ctx, st, ops)
	fmt.Println(ops[0].Result.Status, ops[1].Result.Status, errors.Is(ops[2].Err, store.ErrNotFound))
	// Output: claimed in-progress true
}
