package idemprom_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/idemprom"
)

func ExampleNew() {
	col := idemprom.New(idemprom.Options{})
	rt := idem.Must(idem.New(idem.Options{Observer: col}))
	defer rt.Close(context.Background())
	col.Watch(rt)
	reg := prometheus.NewRegistry()
	reg.MustRegister(col) // serve it with promhttp.HandlerFor(reg, ...)

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fn := func(context.Context) (int, error) {
		once.Do(func() { close(started) })
		<-release
		return 1, nil
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = idem.Do(context.Background(), rt, "k", fn) })
	<-started
	for range 9 {
		wg.Go(func() { _, _ = idem.Do(context.Background(), rt, "k", fn) })
	}
	for rt.Stats().Waiters < 9 {
		time.Sleep(time.Millisecond) // an Example has no *testing.T for idemtest.Eventually
	}
	close(release)
	wg.Wait()

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "idem_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Println(m.GetLabel()[0].GetValue(), m.GetLabel()[1].GetValue(), v)
			}
		}
	}
	// Output:
	// executed ok 1
	// joined ok 9
}
