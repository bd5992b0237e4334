package redisstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// A runtime on Redis. The same code works with redis.NewClusterClient. (Not
// run by the tests: it needs a server at that address; the tests start
// their own.)
func ExampleNew() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	st, err := redisstore.New(ctx, client, redisstore.Options{KeyPrefix: "orders:idem:"})
	if err != nil {
		panic(err) // Redis unreachable
	}
	defer st.Close()
	rt := idem.Must(idem.New(idem.Options{Store: st}))
	defer rt.Close(ctx)
	id, err := idem.Do(ctx, rt, "create-order:req-77", func(ctx context.Context) (string, error) {
		return "order-1234", nil
	})
	fmt.Println(id, err)
}

// Clear the completed results of one scope, page by page, leaving keys in
// progress alone. (Not run by the tests: it needs a server at that address;
// the tests start their own.)
func ExampleStore_Scan() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	st, err := redisstore.New(ctx, client, redisstore.Options{})
	if err != nil {
		panic(err) // Redis unreachable
	}
	defer st.Close()
	prefix := store.BuildKey("", store.Scope{Namespace: "tenant-a", Version: "v1"})
	deleted, cursor := 0, ""
	for {
		keys, next, err := st.Scan(ctx, prefix, cursor, 500)
		if err != nil {
			panic(err)
		}
		for _, key := range keys {
			switch err := st.Forget(ctx, key); {
			case errors.Is(err, store.ErrInProgress): // skipped: a run holds it
			case err != nil:
				panic(err)
			default:
				deleted++ // a key may come twice: a second Forget is a no-op
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	fmt.Println("forgot", deleted, "keys")
}

// Read a key's state without claiming it. (Not run by the tests.)
func ExampleStore_Inspect() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	st, err := redisstore.New(ctx, client, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := st.Inspect(ctx, "create-order:req-77")
	switch {
	case err != nil:
		fmt.Println(err) // Redis failing, or a *CorruptError
	case e.State == store.Held:
		fmt.Println("in progress, owner", e.Token.Owner, "lease left", e.LeaseLeft)
	case e.State == store.Done:
		fmt.Println("completed at", e.Record.CreatedAt, "value", string(e.Record.Value))
	default:
		fmt.Println("absent")
	}
}

// With Options.Scope, the longest key a store claims is store.MaxKeyLen
// less the scope's prefix: a service that takes keys from its callers
// checks them against it. (Not run by the tests: it needs a server at
// that address; the tests start their own.)
func ExampleStore_MaxKeyLen() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer client.Close()
	st, err := redisstore.New(ctx, client, redisstore.Options{Scope: store.Scope{Namespace: "billing", Version: "v2"}})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	// store.MaxKeyLen less len("ff:idemp:billing:v2:").
	fmt.Println(st.MaxKeyLen())
}
