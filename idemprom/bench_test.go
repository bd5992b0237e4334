package idemprom_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/idemprom"
)

var seq atomic.Int64

// BenchmarkObserver compares Do on unique keys without an observer, with
// the Prometheus collector, and with a no-op tracer: the cost of watching.
func BenchmarkObserver(b *testing.B) {
	fn := func(context.Context) (int, error) { return 1, nil }
	run := func(b *testing.B, opts idem.Options, watch func(*idem.Runtime)) {
		rt, err := idem.New(opts)
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close(bg)
		if watch != nil {
			watch(rt)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := idem.Do(bg, rt, "k"+strconv.FormatInt(seq.Add(1), 10), fn); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("none", func(b *testing.B) { run(b, idem.Options{}, nil) })
	b.Run("prometheus", func(b *testing.B) {
		col := idemprom.New(idemprom.Options{})
		prometheus.NewRegistry().MustRegister(col)
		run(b, idem.Options{Observer: col}, col.Watch)
	})
	b.Run("otel-noop", func(b *testing.B) {
		run(b, idem.Options{TracerProvider: noop.NewTracerProvider()}, nil)
	})
}
