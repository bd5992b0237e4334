package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

func ExampleRuntime_Clear() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)

	acme := store.Scope{Namespace: "acme", Version: "v1"}
	for _, order := range []string{"o-1", "o-2", "o-3"} {
		_, _ = idem.Do(ctx, rt, store.BuildKey(order, acme), func(context.Context) (int, error) { return 1, nil })
	}
	other := store.BuildKey("o-1", store.Scope{Namespace: "globex", Version: "v1"})
	_, _ = idem.Do(ctx, rt, other, func(context.Context) (int, error) { return 1, nil })

	res, err := rt.Clear(ctx, acme, idem.ClearOptions{})
	fmt.Println(res.Scanned, res.Deleted, res.Skipped, err)
	_, err = idem.Get[int](ctx, rt, store.BuildKey("o-1", acme))
	fmt.Println(errors.Is(err, idem.ErrNotFound))
	_, err = idem.Get[int](ctx, rt, other) // another tenant: kept
	fmt.Println(err)
	var empty store.Scope // a scope built from empty variables: refused
	_, err = rt.Clear(ctx, empty, idem.ClearOptions{})
	fmt.Println(errors.Is(err, idem.ErrInvalidArgument))
	// Output:
	// 3 3 0 <nil>
	// true
	// <nil>
	// true
}
