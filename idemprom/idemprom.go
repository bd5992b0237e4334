// Package idemprom exports an idem runtime's decisions to Prometheus: calls
// by outcome and result, settle waits, executions, keys in flight, parked
// callers, pending callers per shard, store batches and round trips.
//
//	col := idemprom.New(idemprom.Options{})
//	rt, err := idem.New(idem.Options{Observer: col})
//	col.Watch(rt)
//	prometheus.MustRegister(col)
//
// Metrics (the prefix is Options.Namespace, "idem" by default):
//
//	idem_calls_total{outcome,result}          counter: every call of Do; outcome
//	                                          executed|joined|replayed|none, result
//	                                          ok|error|panic|conflict|fingerprint_mismatch|
//	                                          lease_lost|store_error|overloaded|closed|
//	                                          invalid|canceled|codec_error
//	idem_call_duration_seconds                histogram: whole calls
//	idem_settle_wait_seconds                  histogram: how long callers waited for a run in flight
//	idem_execution_duration_seconds           histogram: function run plus store write, per execution
//	idem_keys_in_flight                       gauge: keys with callers in flight
//	idem_parked_callers                       gauge: callers waiting for a run in flight
//	idem_shard_pending_calls{shard}           gauge: admitted callers per shard (limit: MaxPending)
//	idem_store_batch_operations               histogram: operations per store round trip
//	idem_store_round_trip_seconds             histogram: store round trips
//	idem_store_failed_operations_total        counter: operations the store failed
//	idem_early_takeovers_total                counter: keys taken over from a dead instance's owner
//	idem_invalidations_total                  counter: forgotten keys, cleared scopes and lost subscriptions the store announced
//	idem_cache_drops_total                    counter: cached results those invalidations dropped
//	idem_store_events_total{event}            counter: the store's own counts (store.Counted):
//	                                          slot_reloads, unconfirmed_writes (Redis);
//	                                          evictions, evicted_results, refused_claims (memory)
//
// With Options.NamespaceLabel the call metrics get a "namespace" label
// (the namespace of keys built with store.BuildKey, often a tenant): mind
// its cardinality.
package idemprom

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemrt/idem"
)

// Options configures a Collector. The zero value is valid.
type Options struct {
	// Namespace prefixes every metric name. Default: "idem".
	Namespace string
	// NamespaceLabel adds the key's namespace as a label of the call
	// metrics. Default: false.
	NamespaceLabel bool
	// ConstLabels are added to every metric (an instance name, say).
	ConstLabels prometheus.Labels
	// DurationBuckets are the buckets of the duration histograms, in
	// seconds. Default: 50µs to 30s, roughly ×2.5 apart.
	DurationBuckets []float64
}

var defaultBuckets = []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

var (
	outcomes = []idem.Outcome{idem.NoOutcome, idem.Executed, idem.Joined, idem.Replayed}
	results  = []idem.Result{idem.ResultOK, idem.ResultError, idem.ResultPanic, idem.ResultConflict,
		idem.ResultMismatch, idem.ResultLeaseLost, idem.ResultStoreError, idem.ResultOverloaded,
		idem.ResultClosed, idem.ResultInvalid, idem.ResultCanceled, idem.ResultCodecError}
)

// Collector is an idem.Observer that is also a prometheus.Collector.
// Create it with New, give it to idem.Options.Observer, then Watch the
// runtime for its gauges.
type Collector struct {
	nsLabel bool

	calls      *prometheus.CounterVec
	callDur    *prometheus.HistogramVec
	settle     *prometheus.HistogramVec
	execDur    *prometheus.HistogramVec
	batchOps   prometheus.Histogram
	batchDur   prometheus.Histogram
	storeFails prometheus.Counter

	// Without the namespace label, each (outcome, result) counter is
	// resolved once, so a call costs one atomic add, not a label lookup.
	fast     [4][12]prometheus.Counter
	callDur0 prometheus.Observer
	settle0  prometheus.Observer
	execDur0 prometheus.Observer

	inFlight, parked, pending *prometheus.Desc
	early, storeEvents        *prometheus.Desc
	invals, drops             *prometheus.Desc
	rt                        atomic.Pointer[idem.Runtime]
}

var _ idem.Observer = (*Collector)(nil)
var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector.
func New(opts Options) *Collector {
	ns := opts.Namespace
	if ns == "" {
		ns = "idem"
	}
	buckets := opts.DurationBuckets
	if len(buckets) == 0 {
		buckets = defaultBuckets
	}
	callLabels := []string{"outcome", "result"}
	durLabels := []string(nil)
	if opts.NamespaceLabel {
		callLabels = append(callLabels, "namespace")
		durLabels = []string{"namespace"}
	}
	c := &Collector{nsLabel: opts.NamespaceLabel}
	c.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "calls_total",
		Help: "Calls of Do, by outcome (executed, joined, replayed, none) and result.", ConstLabels: opts.ConstLabels}, callLabels)
	c.callDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "call_duration_seconds",
		Help: "Duration of calls of Do.", Buckets: buckets, ConstLabels: opts.ConstLabels}, durLabels)
	c.settle = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "settle_wait_seconds",
		Help: "How long callers waited for a run of their key in flight.", Buckets: buckets, ConstLabels: opts.ConstLabels}, durLabels)
	c.execDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "execution_duration_seconds",
		Help: "Duration of executions: the function and the store write of its result.", Buckets: buckets, ConstLabels: opts.ConstLabels}, durLabels)
	c.batchOps = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "store_batch_operations",
		Help: "Store operations per round trip (group commit).", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		ConstLabels: opts.ConstLabels})
	c.batchDur = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "store_round_trip_seconds",
		Help: "Duration of store round trips (one batch each).", Buckets: buckets, ConstLabels: opts.ConstLabels})
	c.storeFails = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "store_failed_operations_total",
		Help: "Store operations that failed (the store was down, slow or refused to answer).", ConstLabels: opts.ConstLabels})
	c.inFlight = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "keys_in_flight"),
		"Keys with callers in flight.", nil, opts.ConstLabels)
	c.parked = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "parked_callers"),
		"Callers waiting for a run of their key in flight.", nil, opts.ConstLabels)
	c.pending = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "shard_pending_calls"),
		"Admitted calls per shard, against Options.MaxPending.", []string{"shard"}, opts.ConstLabels)
	c.early = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "early_takeovers_total"),
		"Keys taken over from an owner whose instance was found dead, before its lease ended.", nil, opts.ConstLabels)
	c.invals = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "invalidations_total"),
		"Invalidations the store announced (store.Invalidator): keys forgotten, scopes cleared by any instance, and lost subscriptions.", nil, opts.ConstLabels)
	c.drops = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "cache_drops_total"),
		"Cached results dropped by invalidations.", nil, opts.ConstLabels)
	c.storeEvents = prometheus.NewDesc(prometheus.BuildFQName(ns, "", "store_events_total"),
		"Events the store counts (store.Counted): slot_reloads and unconfirmed_writes on Redis; evictions, evicted_results and refused_claims in memory.",
		[]string{"event"}, opts.ConstLabels)
	if !opts.NamespaceLabel {
		for i, o := range outcomes {
			for j, r := range results {
				c.fast[i][j] = c.calls.WithLabelValues(o.String(), r.String())
			}
		}
		c.callDur0 = c.callDur.WithLabelValues()
		c.settle0 = c.settle.WithLabelValues()
		c.execDur0 = c.execDur.WithLabelValues()
	}
	return c
}

// Watch makes the collector report rt's gauges (keys in flight, parked and
// pending callers). A collector watches one runtime at a time.
func (c *Collector) Watch(rt *idem.Runtime) { c.rt.Store(rt) }

// OnCall implements idem.Observer.
func (c *Collector) OnCall(ev idem.CallEvent) {
	if !c.nsLabel && int(ev.Outcome) < len(c.fast) && int(ev.Result) < len(c.fast[0]) {
		c.fast[ev.Outcome][ev.Result].Inc()
		c.callDur0.Observe(ev.Duration.Seconds())
		if ev.Wait > 0 {
			c.settle0.Observe(ev.Wait.Seconds())
		}
		if ev.Outcome == idem.Executed {
			c.execDur0.Observe(ev.Run.Seconds())
		}
		return
	}
	if !c.nsLabel { // a value this collector does not know yet
		c.calls.WithLabelValues(ev.Outcome.String(), ev.Result.String()).Inc()
		c.callDur0.Observe(ev.Duration.Seconds())
		return
	}
	c.calls.WithLabelValues(ev.Outcome.String(), ev.Result.String(), ev.Namespace).Inc()
	c.callDur.WithLabelValues(ev.Namespace).Observe(ev.Duration.Seconds())
	if ev.Wait > 0 {
		c.settle.WithLabelValues(ev.Namespace).Observe(ev.Wait.Seconds())
	}
	if ev.Outcome == idem.Executed {
		c.execDur.WithLabelValues(ev.Namespace).Observe(ev.Run.Seconds())
	}
}

// OnStoreBatch implements idem.Observer.
func (c *Collector) OnStoreBatch(ev idem.StoreBatchEvent) {
	c.batchOps.Observe(float64(ev.Ops))
	c.batchDur.Observe(ev.Duration.Seconds())
	if ev.Failed > 0 {
		c.storeFails.Add(float64(ev.Failed))
	}
}

// kept are the metrics the collector records itself; the gauges are read
// from the watched runtime at each scrape.
func (c *Collector) kept() []prometheus.Collector {
	return []prometheus.Collector{c.calls, c.callDur, c.settle, c.execDur, c.batchOps, c.batchDur, c.storeFails}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.kept() {
		m.Describe(ch)
	}
	ch <- c.inFlight
	ch <- c.parked
	ch <- c.pending
	ch <- c.early
	ch <- c.invals
	ch <- c.drops
	ch <- c.storeEvents
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.kept() {
		m.Collect(ch)
	}
	rt := c.rt.Load()
	if rt == nil {
		return
	}
	var inFlight, parked int
	for i, s := range rt.ShardStats() {
		inFlight += s.InFlight
		parked += s.Waiters
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending), strconv.Itoa(i))
	}
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(inFlight))
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(parked))
	st := rt.Stats()
	ch <- prometheus.MustNewConstMetric(c.early, prometheus.CounterValue, float64(st.EarlyTakeovers))
	ch <- prometheus.MustNewConstMetric(c.invals, prometheus.CounterValue, float64(st.Invalidations))
	ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, float64(st.CacheDrops))
	for _, n := range rt.StoreCounts() {
		ch <- prometheus.MustNewConstMetric(c.storeEvents, prometheus.CounterValue, float64(n.Value), n.Name)
	}
}
