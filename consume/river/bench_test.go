package river_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	idemriver "github.com/idemrt/idem/consume/river"
)

// The benchmark's jobs: one kind per worker, the same work (one INSERT
// into effects) for each.
type (
	benchPlain struct{ Key string }
	benchIdem  struct{ Key string }
	benchTx    struct{ Key string }
)

func (benchPlain) Kind() string { return "bench_plain" }
func (benchIdem) Kind() string  { return "bench_idem" }
func (benchTx) Kind() string    { return "bench_tx" }

func (a benchIdem) IdempotencyKey() string { return a.Key }
func (a benchTx) IdempotencyKey() string   { return a.Key }

// BenchmarkThroughput works batches of jobs through one River client with
// three workers doing the same INSERT: River's own (plain), NewWorker
// (idem.Do on a pgstore store) and NewTxWorker (the INSERT, the record and
// JobCompleteTx in one transaction), the batches taking turns (in a
// rotating order, so none is always first after a pause), and
// reports each one's jobs per second and the ratios to plain: the cost of
// idem in front, measured in one run on one database.
//
//	go test -run '^$' -bench Throughput -benchtime 12x ./consume/river/
func BenchmarkThroughput(b *testing.B) {
	const batch = 200
	e := newEnv(b)
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[benchPlain]) error {
		return effect(ctx, e.work, job.Args.Key, "plain")
	}))
	wi, err := idemriver.NewWorker(idemriver.Options[benchIdem]{Consumer: consumer(b, e.rt)},
		func(ctx context.Context, job *river.Job[benchIdem]) error {
			return effect(ctx, e.work, job.Args.Key, "idem")
		})
	if err != nil {
		b.Fatal(err)
	}
	river.AddWorker(workers, wi)
	wt, err := idemriver.NewTxWorker(ctx, e.work, idemriver.Options[benchTx]{Consumer: consumer(b, e.rt)},
		func(ctx context.Context, tx pgx.Tx, job *river.Job[benchTx]) error {
			return effect(ctx, tx, job.Args.Key, "tx")
		})
	if err != nil {
		b.Fatal(err)
	}
	river.AddWorker(workers, wt)
	cfg := config(workers)
	cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 16}}
	c := start(b, e.river, cfg)
	done, cancel := c.SubscribeConfig(&river.SubscribeConfig{ChanSize: 4 * batch,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled}})
	defer cancel()

	variants := []struct {
		name string
		args func(key string) river.JobArgs
		took time.Duration
	}{
		{"plain", func(k string) river.JobArgs { return benchPlain{k} }, 0},
		{"idem", func(k string) river.JobArgs { return benchIdem{k} }, 0},
		{"tx", func(k string) river.JobArgs { return benchTx{k} }, 0},
	}
	n := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range variants { // each batch starts with another variant
			v := (i + r) % len(variants)
			params := make([]river.InsertManyParams, batch)
			for j := range params {
				params[j].Args = variants[v].args(fmt.Sprint(variants[v].name, "-", i, "-", j))
			}
			t0 := time.Now()
			if _, err := c.InsertMany(ctx, params); err != nil {
				b.Fatal(err)
			}
			for range batch {
				select {
				case ev := <-done:
					if ev.Kind != river.EventKindJobCompleted {
						b.Fatalf("job %d: %s", ev.Job.ID, ev.Kind)
					}
				case <-ctx.Done():
					b.Fatal("the batch did not complete")
				}
			}
			variants[v].took += time.Since(t0)
		}
		n += batch
	}
	b.StopTimer()
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	for _, v := range variants {
		b.ReportMetric(rate(v.took), v.name+"-jobs/s")
	}
	b.ReportMetric(rate(variants[1].took)/rate(variants[0].took), "idem/plain")
	b.ReportMetric(rate(variants[2].took)/rate(variants[0].took), "tx/plain")
	b.ReportMetric(0, "ns/op")
}
