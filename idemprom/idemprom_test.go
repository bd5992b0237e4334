package idemprom_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/idemprom"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/redisstore"
)

var bg = context.Background()

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve registers col and serves /metrics on a loopback listener.
func serve(t *testing.T, col *idemprom.Collector) string {
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// scrape fetches and parses the exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the value of the series of family name with the labels.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.Metric {
		ok := true
		for _, lp := range m.Label {
			if want, has := labels[lp.GetName()]; has && want != lp.GetValue() {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// A 100-caller storm, scraped through a real HTTP endpoint: 1 executed,
// 99 joined; their waits are in the settle histogram; the gauges show the
// storm while it waits and nothing after.
func TestStormScraped(t *testing.T) {
	col := idemprom.New(idemprom.Options{})
	rt := idemtest.Runtime(t, idem.Options{Observer: col})
	col.Watch(rt)
	url := serve(t, col)

	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fn := func(context.Context) (int, error) {
		once.Do(func() { close(started) })
		<-release
		return 1, nil
	}
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { _, _ = idem.Do(bg, rt, "storm", fn) })
	}
	<-started
	idemtest.Eventually(t, "99 parked callers", func() bool { return rt.Stats().Waiters >= 99 })
	during := scrape(t, url)
	if v := value(t, during, "idem_parked_callers", nil); v != 99 {
		t.Errorf("parked callers during the storm: %v", v)
	}
	if v := value(t, during, "idem_keys_in_flight", nil); v != 1 {
		t.Errorf("keys in flight during the storm: %v", v)
	}
	var pending float64
	for _, m := range during["idem_shard_pending_calls"].Metric {
		pending += m.Gauge.GetValue()
	}
	if pending != 100 {
		t.Errorf("pending calls over the shards: %v, want 100", pending)
	}
	close(release)
	wg.Wait()
	_, _ = idem.Do(bg, rt, "storm", fn) // a replay

	after := scrape(t, url)
	for _, c := range []struct {
		outcome string
		want    float64
	}{{"executed", 1}, {"joined", 99}, {"replayed", 1}} {
		if v := value(t, after, "idem_calls_total", map[string]string{"outcome": c.outcome, "result": "ok"}); v != c.want {
			t.Errorf("idem_calls_total{outcome=%q,result=\"ok\"} = %v, want %v", c.outcome, v, c.want)
		}
	}
	if v := value(t, after, "idem_settle_wait_seconds", nil); v != 99 {
		t.Errorf("settle waits observed: %v, want 99", v)
	}
	if v := value(t, after, "idem_execution_duration_seconds", nil); v != 1 {
		t.Errorf("executions observed: %v, want 1", v)
	}
	if v := value(t, after, "idem_call_duration_seconds", nil); v != 101 {
		t.Errorf("calls observed: %v, want 101", v)
	}
	if v := value(t, after, "idem_parked_callers", nil); v != 0 {
		t.Errorf("parked callers after: %v", v)
	}
}

// Every kind of result lands in its own series.
func TestResults(t *testing.T) {
	col := idemprom.New(idemprom.Options{NamespaceLabel: true})
	rt := idemtest.Runtime(t, idem.Options{Observer: col, Shards: 1, MaxPending: 1})
	col.Watch(rt)
	url := serve(t, col)
	key := store.BuildKey("k", store.Scope{Namespace: "tenant-a"})
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { return 0, errors.New("boom") })
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { panic("bad") })
	_, _ = idem.Do(bg, rt, "", func(context.Context) (int, error) { return 0, nil })
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { return 1, nil }, idem.WithFingerprint([]byte("a")))
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { return 1, nil }, idem.WithFingerprint([]byte("b")))
	release := make(chan struct{})
	go idem.Do(bg, rt, "busy", func(context.Context) (int, error) { <-release; return 1, nil })
	idemtest.Eventually(t, "the busy key in flight", func() bool { return rt.Stats().InFlight >= 1 })
	_, _ = idem.Do(bg, rt, "other", func(context.Context) (int, error) { return 1, nil }) // MaxPending 1
	close(release)
	fams := scrape(t, url)
	for _, c := range []struct{ outcome, result, ns string }{
		{"executed", "error", "tenant-a"}, {"executed", "panic", "tenant-a"}, {"none", "invalid", ""},
		{"executed", "ok", "tenant-a"}, {"none", "fingerprint_mismatch", "tenant-a"}, {"none", "overloaded", ""},
	} {
		if v := value(t, fams, "idem_calls_total", map[string]string{"outcome": c.outcome, "result": c.result, "namespace": c.ns}); v != 1 {
			t.Errorf("calls{outcome=%s,result=%s,namespace=%q} = %v, want 1", c.outcome, c.result, c.ns, v)
		}
	}
}

// On Redis, store batches and round trips are counted.
func TestStoreMetrics(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	st, err := redisstore.New(bg, client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	col := idemprom.New(idemprom.Options{})
	rt := idemtest.Runtime(t, idem.Options{Observer: col, Store: st})
	col.Watch(rt)
	url := serve(t, col)
	for i := range 20 {
		if _, err := idem.Do(bg, rt, fmt.Sprint("k", i), func(context.Context) (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
	}
	// A batch is observed just after its results go back to the shard, so
	// the last one may still be on its way.
	var batches, ops float64
	idemtest.Eventually(t, "40 operations in the batches observed", func() bool {
		fams := scrape(t, url)
		batches, ops = value(t, fams, "idem_store_round_trip_seconds", nil), 0
		for _, m := range fams["idem_store_batch_operations"].Metric {
			ops += m.Histogram.GetSampleSum()
		}
		return ops >= 40
	})
	if batches < 2 || batches > 40 {
		t.Fatalf("store round trips: %v for 20 keys (40 operations)", batches)
	}
	if ops != 40 || float64(rt.Stats().Batches) != batches {
		t.Fatalf("operations in batches: %v (want 40); batches %v vs the runtime's %d", ops, batches, rt.Stats().Batches)
	}
	// Redis gone: failed operations are counted.
	srv.Kill()
	_, err = idem.Do(bg, rt, "down", func(context.Context) (int, error) { return 0, nil })
	if !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("with Redis down: %v", err)
	}
	// The failed batch, too, is observed after its results went back to
	// the shard, so Do may return before it is counted.
	idemtest.Eventually(t, "a failed store operation counted", func() bool {
		return value(t, scrape(t, url), "idem_store_failed_operations_total", nil) >= 1
	})
}

// OnCall is exported (the Collector is an idem.Observer anyone can call, or
// fan events out to). An Outcome or Result the fast-path arrays do not cover
// (a newer runtime's, or a forwarded event) is counted under its name, never
// a panic in the caller's goroutine.
func TestOutOfRangeEventDoesNotPanic(t *testing.T) {
	for _, ev := range []idem.CallEvent{
		{Outcome: idem.Executed, Result: idem.Result(12)},
		{Outcome: idem.Outcome(4), Result: idem.ResultOK},
	} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("OnCall(%+v) panicked: %v", ev, p)
				}
			}()
			idemprom.New(idemprom.Options{}).OnCall(ev)
		}()
	}
}

// The store's own counts and early takeovers are exported: a full
// in-memory store's refusals show as idem_store_events_total.
func TestStoreEventsExported(t *testing.T) {
	mem := memstore.New(memstore.Options{MaxRecords: 64})
	col := idemprom.New(idemprom.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem, Observer: col, DisableCache: true})
	col.Watch(rt)
	url := serve(t, col)
	for i := 0; i < 5000 && mem.Refused() == 0; i++ {
		_, _ = idem.Do(context.Background(), rt, fmt.Sprint("k", i), func(context.Context) (int, error) { return i, nil })
	}
	if mem.Refused() == 0 {
		t.Fatal("the store never filled")
	}
	fams := scrape(t, url)
	if got := value(t, fams, "idem_store_events_total", map[string]string{"event": "refused_claims"}); got != float64(mem.Refused()) {
		t.Fatalf("refused_claims exported %v, the store counted %d", got, mem.Refused())
	}
	if got := value(t, fams, "idem_early_takeovers_total", nil); got != 0 {
		t.Fatalf("early takeovers %v, want 0", got)
	}
}

// Invalidations and the cache entries they drop are exported: a Forget on
// another runtime sharing the store drops this runtime's cached result.
func TestInvalidationsExported(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	col := idemprom.New(idemprom.Options{})
	rt := idemtest.Runtime(t, idem.Options{Store: mem, Observer: col})
	other := idemtest.Runtime(t, idem.Options{Store: mem})
	col.Watch(rt)
	url := serve(t, col)
	if _, err := idem.Do(context.Background(), rt, "k", func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if err := other.Forget(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	idemtest.Eventually(t, "the cached result dropped", func() bool { return rt.Stats().CacheDrops == 1 })
	fams := scrape(t, url)
	if got := value(t, fams, "idem_invalidations_total", nil); got != 1 {
		t.Fatalf("invalidations %v, want 1", got)
	}
	if got := value(t, fams, "idem_cache_drops_total", nil); got != 1 {
		t.Fatalf("cache drops %v, want 1", got)
	}
}
