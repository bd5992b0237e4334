package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// The protocol between a caller and its shard, as idem.Do speaks it: send a
// Request, get a Grant, run, send a Finish, get the settled record. A second
// caller gets the record without running (from the LRU, which keeps one
// copy of a result made here: the owner's value).
func ExampleNewSet() {
	ctx := context.Background()
	set, err := actors.NewSet(ctx, 2, actors.Config{
		Store:        memstore.New(memstore.Options{}),
		Clock:        clock.Real(),
		Logger:       slog.New(slog.DiscardHandler),
		CacheEntries: 100,
	})
	if err != nil {
		panic(err)
	}
	defer set.Close(ctx)

	call := func() actors.Reply {
		r := &actors.Request{Key: "k", Lease: time.Minute, TTL: time.Hour, Settle: time.Second,
			Reply: make(chan actors.Reply, 1)}
		if err := set.Send(r); err != nil {
			panic(err)
		}
		rep := <-r.Reply
		if rep.Kind != actors.Grant {
			return rep
		}
		// This caller owns the key: run, then finish.
		r.Finish = actors.Finish{Req: r, Kind: actors.Success, Record: store.Record{Value: []byte(`"done"`)}, Value: "done"}
		set.Finish(&r.Finish)
		return <-r.Reply
	}
	first, second := call(), call()
	fmt.Println(first.Kind == actors.Settled, first.Result.Value)
	fmt.Println(second.Kind == actors.Settled, second.Result.Value)
	// Output:
	// true done
	// true done
}
