package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/memstore"
)

var errCardRefused = errors.New("card declined")

// Register the codes at start-up, in every service that stores or replays
// them.
func init() {
	if err := idem.RegisterError("card_declined", errCardRefused); err != nil {
		panic(err)
	}
}

// A declined card is a declined card on every instance: the second
// runtime, which shares the store as another process sharing Redis would,
// replays an error that matches errCardRefused.
func ExampleRegisterError() {
	ctx := context.Background()
	shared := memstore.New(memstore.Options{})
	a := idem.Must(idem.New(idem.Options{Store: shared}))
	defer a.Close(ctx)
	b := idem.Must(idem.New(idem.Options{Store: shared}))
	defer b.Close(ctx)

	charge := func(context.Context) (string, error) {
		return "", idem.Permanent(fmt.Errorf("charge order-4: %w", errCardRefused))
	}
	_, err := idem.Do(ctx, a, "charge:order-4", charge)
	fmt.Println(err)
	_, err = idem.Do(ctx, b, "charge:order-4", charge)
	fmt.Println(err, errors.Is(err, errCardRefused))
	// Output:
	// charge order-4: card declined
	// charge order-4: card declined true
}
