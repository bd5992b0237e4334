package redisstore_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
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
