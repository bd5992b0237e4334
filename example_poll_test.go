package idem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// sqlStore stands for a store of your own: it implements store.Store and
// nothing more, so it cannot wake waiters on other instances (here it
// keeps its records in a memstore).
type sqlStore struct{ store.Store }

// A duplicate on another instance of a store that cannot wake it checks
// the key again at doubling waits up to PollInterval: it gets the result
// at most about 20ms after the first instance stored it.
func ExampleOptions_pollInterval() {
	ctx := context.Background()
	shared := sqlStore{memstore.New(memstore.Options{})}
	a := idem.Must(idem.New(idem.Options{Store: shared, PollInterval: 20 * time.Millisecond}))
	defer a.Close(ctx)
	b := idem.Must(idem.New(idem.Options{Store: shared, PollInterval: 20 * time.Millisecond}))
	defer b.Close(ctx)

	started, finish := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = idem.Do(ctx, a, "report:2026-12", func(context.Context) (string, error) {
			close(started)
			<-finish // the work
			return "report.pdf", nil
		})
	}()
	<-started
	answer := make(chan string)
	go func() {
		var out idem.Outcome
		v, err := idem.Do(ctx, b, "report:2026-12", func(context.Context) (string, error) { return "again", nil },
			idem.WithOutcome(&out))
		answer <- fmt.Sprint(v, " ", out, " ", err)
	}()
	for b.Stats().Waiters == 0 { // until b's call waits for a's run
		time.Sleep(time.Millisecond)
	}
	close(finish)
	fmt.Println(<-answer)
	// Output: report.pdf joined <nil>
}
