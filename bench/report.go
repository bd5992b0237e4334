package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Report is everything one run of the harness measured. It is written as
// report.json and rendered as report.html by -out.
type Report struct {
	Started  time.Time `json:"started"`
	Duration string    `json:"duration"` // wall time of the whole run
	Machine  Machine   `json:"machine"`
	Config   Config    `json:"config"`
	Results  []Result  `json:"results"`
	Targets  []Target  `json:"targets"`
	Sizes    []Sizes   `json:"sizes"`
	// Liveness is the store traffic of early takeover, per store.
	Liveness []LivenessTraffic `json:"liveness"`
	// WorkloadAllocsPerOp is what the harness's own workload allocates per
	// call (the key, the result's ID), which every result's AllocsPerOp
	// includes: the direct system, run once per report.
	WorkloadAllocsPerOp float64 `json:"workload_allocs_per_op"`
	// OK is false when some system ran a key more than once or gave a call
	// another key's result; the harness then exits non-zero. An unsafe
	// baseline's keys that ran twice are listed but do not count.
	OK bool `json:"ok"`
}

// Machine describes where the run happened.
type Machine struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model,omitempty"`
	Redis      string `json:"redis,omitempty"`    // server version, when a Redis store is used
	Postgres   string `json:"postgres,omitempty"` // server version, when the PostgreSQL store is used
}

// Result is one system's run of one scenario.
type Result struct {
	Scenario string `json:"scenario"`
	System   string `json:"system"`
	Store    string `json:"store"` // memory, redis, redis-cluster, postgres

	Calls        int64   `json:"calls"`
	Errors       int64   `json:"errors"`
	WrongResults int64   `json:"wrong_results"` // a result that belongs to another key: never acceptable
	FirstError   string  `json:"first_error,omitempty"`
	Seconds      float64 `json:"seconds"`
	Throughput   float64 `json:"throughput"` // calls per second

	Latency Latency `json:"latency"` // of every call
	// Settle is the time from the owner's function returning to a waiting
	// duplicate being released (calls that joined a run in flight).
	Settle Latency `json:"settle"`
	// SettleOther and SettleSame split Settle in the xstorm scenario: the
	// duplicates on another instance than the owner's, and those on the
	// owner's own instance (released in-process, sooner).
	SettleOther *Latency `json:"settle_other_instances,omitempty"`
	SettleSame  *Latency `json:"settle_same_instance,omitempty"`
	// NegativeSettles counts the settle samples recorded as 0 because
	// they came out negative: the key ran again, and that later execution
	// returned after the duplicate did (a key run twice).
	NegativeSettles int64 `json:"negative_settles,omitempty"`

	// Executions of the function, and distinct keys completed; a correct
	// system has Executions == KeysCompleted.
	Executions    int64    `json:"executions"`
	KeysCompleted int64    `json:"keys_completed"`
	RanTwice      []string `json:"ran_twice,omitempty"` // keys executed more than once (at most 20 listed)
	RanTwiceCount int64    `json:"ran_twice_count"`

	Outcomes map[string]int64 `json:"outcomes,omitempty"` // executed, joined, replayed

	StoreRoundTrips int64   `json:"store_round_trips"` // batches (idem) or calls sent to the store
	StoreOps        int64   `json:"store_ops"`
	AllocsPerOp     float64 `json:"allocs_per_op"`
	BytesPerOp      float64 `json:"bytes_per_op"`

	// RedisCPU is the Redis server's CPU per call of the run (Redis
	// stores only; on a cluster, summed over its masters).
	RedisCPU *RedisCPU `json:"redis_cpu,omitempty"`

	// Unsafe marks a baseline that does not promise one execution per key
	// (the naive Redis baseline): its keys that ran twice are reported but
	// do not fail the run.
	Unsafe bool `json:"unsafe,omitempty"`

	// Ratios of this result's throughput to each baseline's in the same
	// scenario (only on the idem rows; in the tx scenarios, on pgtx's).
	Ratios map[string]float64 `json:"ratios,omitempty"`

	// RoundThroughputs are the calls per second of each round, when the
	// scenario's systems alternated in rounds (the tx scenarios), and
	// RoundRatios the ratios of each round, on the row that has Ratios:
	// how much the ratio moved on a noisy machine.
	RoundThroughputs []float64            `json:"round_throughputs,omitempty"`
	RoundRatios      map[string][]float64 `json:"round_ratios,omitempty"`

	// Rows is the exactly-once check of the business rows the tx
	// scenarios write: one for each key that ran.
	Rows *RowCheck `json:"rows,omitempty"`
}

// RowCheck counts the business rows of a tx scenario's run by key, after
// the run. It passes when every key a call got the result of has exactly
// one row and no other key has any.
type RowCheck struct {
	Rows    int64 `json:"rows"`             // rows in the table
	Keys    int64 `json:"keys"`             // keys with at least one row
	Twice   int64 `json:"keys_twice"`       // keys with more than one row
	Missing int64 `json:"keys_without_row"` // keys a call got the result of, with no row
	Stray   int64 `json:"stray_rows"`       // rows of keys no function ran for
	// Examples names a few of the keys that failed the check.
	Examples []string `json:"examples,omitempty"`
	OK       bool     `json:"ok"`
}

// ranTwice is how many keys r ran more than once: RanTwiceCount, or the
// number of keys listed when that is more.
func (r Result) ranTwice() int64 {
	return max(r.RanTwiceCount, int64(len(r.RanTwice)))
}

// sortedKeys lists the keys of m, such as a Result's Ratios or Outcomes, in
// order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Latency is a latency distribution summary, with a histogram for charts.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
	// Buckets are log-spaced: bucket i counts values below UpperUS[i] µs
	// (and at least the previous bound).
	UpperUS []float64 `json:"upper_us,omitempty"`
	Counts  []int64   `json:"counts,omitempty"`
}

// Target is one of the performance targets, as met or not.
type Target struct {
	Name     string  `json:"name"`
	Goal     string  `json:"goal"`
	Measured string  `json:"measured"`
	Ratio    float64 `json:"ratio,omitempty"`
	Met      bool    `json:"met"`
	Skipped  string  `json:"skipped,omitempty"` // why it could not be checked in this run
}

// Sizes are memory costs of one system, measured once per run: Go heap
// bytes (and, on Redis, MEMORY USAGE of a record; on PostgreSQL, the
// table's size with its indexes per row). A Go heap figure is the median
// of Rounds rounds, each of Records records or InFlightKeys keys; when it
// is unsound (see heap.go) it is 0 and its Unsound field says why.
type Sizes struct {
	System                 string    `json:"system"`
	BytesPerInFlightKey    float64   `json:"bytes_per_in_flight_key"`
	BytesPerRecord         float64   `json:"bytes_per_record"`
	RedisBytesPerRecord    float64   `json:"redis_bytes_per_record,omitempty"`
	PostgresBytesPerRecord float64   `json:"postgres_bytes_per_record,omitempty"`
	Rounds                 int       `json:"rounds,omitempty"`
	Records                int       `json:"records_per_round,omitempty"`
	InFlightKeys           int       `json:"in_flight_keys_per_round,omitempty"`
	InFlightRounds         []float64 `json:"in_flight_rounds,omitempty"`  // bytes per key in flight of each round kept
	RecordRounds           []float64 `json:"record_rounds,omitempty"`     // bytes per record of each round kept
	InFlightDropped        int       `json:"in_flight_dropped,omitempty"` // rounds run again: the heap shrank during them
	RecordDropped          int       `json:"record_dropped,omitempty"`
	InFlightUnsound        string    `json:"in_flight_unsound,omitempty"`
	RecordUnsound          string    `json:"record_unsound,omitempty"`
}

func writeJSON(dir string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.json"), b, 0o644)
}

// label names r's system and store: "idem (postgres)", for a run of more
// than one store.
func (r Result) label() string { return r.System + " (" + r.Store + ")" }

// multiStore reports whether scenario's results come from more than one
// store.
func multiStore(results []Result, scenario string) bool {
	store := ""
	for _, r := range results {
		if r.Scenario != scenario {
			continue
		}
		if store != "" && r.Store != store {
			return true
		}
		store = r.Store
	}
	return false
}
