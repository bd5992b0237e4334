package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/memstore"
)

// OverLimitError is a typed business error: its message carries its field,
// so that its decoder can rebuild it.
type OverLimitError struct{ Limit int }

func (e *OverLimitError) Error() string { return fmt.Sprintf("over the limit of %d", e.Limit) }

func init() {
	err := idem.RegisterErrorType("over_limit", func(msg string) *OverLimitError {
		var e OverLimitError
		if _, err := fmt.Sscanf(msg, "over the limit of %d", &e.Limit); err != nil {
			return nil // not one of ours after all: the message alone is replayed
		}
		return &e
	})
	if err != nil {
		panic(err)
	}
}

// Another instance gets the error back as an *OverLimitError, with its
// field.
func ExampleRegisterErrorType() {
	ctx := context.Background()
	shared := memstore.New(memstore.Options{})
	a := idem.Must(idem.New(idem.Options{Store: shared}))
	defer a.Close(ctx)
	b := idem.Must(idem.New(idem.Options{Store: shared}))
	defer b.Close(ctx)

	transfer := func(context.Context) (string, error) {
		return "", idem.Permanent(fmt.Errorf("transfer t-1: %w", &OverLimitError{Limit: 1000}))
	}
	_, _ = idem.Do(ctx, a, "transfer:t-1", transfer)
	_, err := idem.Do(ctx, b, "transfer:t-1", transfer)
	var over *OverLimitError
	fmt.Println(err)
	fmt.Println(errors.As(err, &over), over.Limit)
	// Output:
	// transfer t-1: over the limit of 1000
	// true 1000
}
