package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// The transactional path: the tx-unique and tx-dup scenarios, on
// PostgreSQL only. Each call's function charges an amount: it writes one
// row to a charges table, which has no unique constraint on the key, so
// that only the system keeps a key to one row. Three systems do it:
//
//   - idem: idem.Do on the PostgreSQL store, its function inserting the
//     row on the work pool in a statement of its own (autocommit). One row
//     per key while no process dies; a crash between the insert and the
//     completion leaves the row and lets the key run again.
//   - pgtx: pgtx.Do, its function inserting the row in the transaction
//     that completes the key's record.
//   - by-hand: what a user writes without idem: one transaction that
//     inserts the key into a keys table with ON CONFLICT DO NOTHING and,
//     if that inserted it, runs the function and inserts the row; then
//     COMMIT. It keeps no result: a call that finds the key gets none (the
//     outcome "deduped"), and one that finds it in flight waits on the
//     key's index entry until the first transaction ends (PostgreSQL does
//     that waiting, not the code).
//
// tx-unique calls a new key every time. tx-dup calls the slow scenario's
// mix with the function's own time (-work): a -dup share of the calls
// repeat one of the last few keys, in flight or just completed, the rest
// are new; unlike the zipf mix, that share does not grow as a system
// completes keys, so a faster system does not get an easier mix. The
// systems alternate in -tx-rounds rounds, after a warm-up round
// that is not measured, so that a noisy machine slows each of them alike;
// the ratios are pgtx's throughput to each of the others', over the whole
// run and per round. After the run, each key's rows are counted
// (RowCheck).

// txSystems run the tx scenarios; txOnlySystems run nothing else.
var (
	txSystems     = []string{"idem", "pgtx", "by-hand"}
	txOnlySystems = []string{"pgtx", "by-hand"}
)

// isTxScenario reports whether scenario is one of the transactional path's.
func isTxScenario(scenario string) bool { return strings.HasPrefix(scenario, "tx-") }

// keyMix is the scenario whose keys scenario calls: a tx scenario's is
// the one named in txKeyMix.
func keyMix(scenario string) string {
	if m, ok := txKeyMix[scenario]; ok {
		return m
	}
	return scenario
}

var txKeyMix = map[string]string{"tx-unique": "unique", "tx-dup": "slow"}

// ratioSubject is the system whose row carries a scenario's ratios.
func ratioSubject(scenario string) string {
	if isTxScenario(scenario) {
		return "pgtx"
	}
	return "idem"
}

// txSystem is one of the tx scenarios' systems.
type txSystem struct {
	n       string
	rt      *idem.Runtime  // idem and pgtx
	st      *pgstore.Store // idem and pgtx
	pg      *pgxpool.Pool  // the store's pool, which drops the tables
	work    *pgxpool.Pool  // where the functions write
	charges string         // the business table
	keys    string         // by-hand's keys table
	insert  string         // the charge
	claim   string         // by-hand's key insert
	claims  atomic.Int64   // by-hand's key inserts so far
}

// newTxSystem builds system name of a tx scenario on tables of its own.
func newTxSystem(name string, e *env, scenario string) (system, error) {
	if !isTxScenario(scenario) {
		return nil, fmt.Errorf("%s runs in the tx scenarios only", name)
	}
	if e.cfg.Store != "postgres" || e.pg == nil || e.pgWork == nil {
		return nil, fmt.Errorf("%s: the tx scenarios need -postgres DSN", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := fmt.Sprintf("idem_bench_%d_%d", time.Now().Unix(), e.tables.Add(1))
	s := &txSystem{n: name, pg: e.pg, work: e.pgWork, charges: base + "_charges"}
	s.insert = "INSERT INTO " + s.charges + " (key, amount) VALUES ($1, $2)"
	if _, err := e.pg.Exec(ctx, "CREATE TABLE "+s.charges+" (id bigserial PRIMARY KEY, key text NOT NULL, amount int NOT NULL)"); err != nil {
		return nil, err
	}
	if name == "by-hand" {
		s.keys = base + "_keys"
		s.claim = "INSERT INTO " + s.keys + " (key) VALUES ($1) ON CONFLICT DO NOTHING"
		if _, err := e.pg.Exec(ctx, "CREATE TABLE "+s.keys+" (key text PRIMARY KEY)"); err != nil {
			s.close()
			return nil, err
		}
		return s, nil
	}
	st, err := e.pgStore()
	if err != nil {
		s.close()
		return nil, err
	}
	s.st = st
	if s.rt, err = e.newRuntime(name, st); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *txSystem) name() string { return s.n }

func (s *txSystem) do(ctx context.Context, key string, fn workFn, withOutcome bool) (receipt, outcome, error) {
	var out idem.Outcome
	var opts []idem.CallOption
	if withOutcome {
		opts = append(opts, idem.WithOutcome(&out))
	}
	var v receipt
	var err error
	switch s.n {
	case "by-hand":
		return s.byHand(ctx, key, fn)
	case "pgtx":
		v, err = pgtx.Do(ctx, s.rt, s.work, key, func(ctx context.Context, tx pgx.Tx) (receipt, error) {
			r, err := fn(ctx)
			if err != nil {
				return r, err
			}
			_, err = tx.Exec(ctx, s.insert, key, r.Amount)
			return r, err
		}, opts...)
	default:
		v, err = idem.Do(ctx, s.rt, key, func(ctx context.Context) (receipt, error) {
			r, err := fn(ctx)
			if err != nil {
				return r, err
			}
			_, err = s.work.Exec(ctx, s.insert, key, r.Amount)
			return r, err
		}, opts...)
	}
	return v, outcome(out), err
}

// byHand is the hand-written path: the key and the charge in one
// transaction, the key's insert deciding whether the function runs.
func (s *txSystem) byHand(ctx context.Context, key string, fn workFn) (receipt, outcome, error) {
	tx, err := s.work.Begin(ctx)
	if err != nil {
		return receipt{}, noOutcome, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // nothing left to roll back after COMMIT
	s.claims.Add(1)
	tag, err := tx.Exec(ctx, s.claim, key)
	if err != nil {
		return receipt{}, noOutcome, err
	}
	if tag.RowsAffected() == 0 {
		return receipt{}, deduped, tx.Rollback(ctx)
	}
	r, err := fn(ctx)
	if err != nil {
		return r, executed, err
	}
	if _, err := tx.Exec(ctx, s.insert, key, r.Amount); err != nil {
		return r, executed, err
	}
	return r, executed, tx.Commit(ctx)
}

// storeCalls counts idem's store batches and operations; by-hand's, its
// key inserts (the statement that does what the store does for idem).
func (s *txSystem) storeCalls() (int64, int64) {
	if s.rt == nil {
		n := s.claims.Load()
		return n, n
	}
	st := s.rt.Stats()
	return st.Batches, st.Ops
}

// rowsPerKey returns how many charges each key has.
func (s *txSystem) rowsPerKey(ctx context.Context) (map[string]int64, error) {
	rows, err := s.work.Query(ctx, "SELECT key, count(*) FROM "+s.charges+" GROUP BY key")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		m[k] = n
	}
	return m, rows.Err()
}

func (s *txSystem) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.rt != nil {
		_ = s.rt.Close(ctx)
	}
	if s.st != nil {
		closeStore(s.st, nil, s.pg)
	}
	for _, t := range []string{s.charges, s.keys} {
		if t != "" {
			_, _ = s.pg.Exec(ctx, "DROP TABLE IF EXISTS "+t)
		}
	}
}

// checkRows counts the rows r's system wrote for each key of the run
// against the tracker: exactly one for every key a call got the result
// of, none for a key whose function never ran.
func checkRows(ctx context.Context, r *run, s *txSystem) (*RowCheck, error) {
	counts, err := s.rowsPerKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: counting its rows: %w", r.scenario, s.n, err)
	}
	return countRows(r, counts), nil
}

// countRows checks counts, the rows of each key, against r's tracker; it
// takes counts' entries out.
func countRows(r *run, counts map[string]int64) *RowCheck {
	c := &RowCheck{}
	for _, n := range counts {
		c.Rows += n
	}
	c.Keys = int64(len(counts))
	fail := func(key, why string) {
		if len(c.Examples) < 10 {
			c.Examples = append(c.Examples, key+": "+why)
		}
	}
	limit := r.maxID
	for id := int64(1); id <= limit; id++ {
		key := keyString(r.prefix, id)
		n, slot := counts[key], r.tr.slot(id)
		delete(counts, key)
		switch {
		case n > 1:
			c.Twice++
			fail(key, fmt.Sprintf("%d rows", n))
		case n == 0 && slot.ok.Load():
			c.Missing++
			fail(key, "no row")
		case n > 0 && slot.execs.Load() == 0:
			c.Stray += n
			fail(key, "a row, and its function never ran")
		}
	}
	for key, n := range counts {
		c.Stray += n
		fail(key, "a row of a key the run never called")
	}
	c.OK = c.Twice == 0 && c.Missing == 0 && c.Stray == 0
	return c
}

// runAlternating runs the systems names of tx scenario sc on es's store
// in es.cfg.TxRounds rounds: in each, every system in turn for -duration
// divided by the rounds, on its own keys, tables and workers, which carry
// over from round to round. It returns their results, rows checked and
// per-round ratios set.
func runAlternating(ctx context.Context, e, es *env, sc string, names []string, progress *os.File) ([]Result, error) {
	cfg := es.cfg
	var runs []*run
	defer func() {
		for _, r := range runs {
			r.sys.close()
		}
	}()
	for _, name := range names {
		sys, err := newSystem(name, es, sc)
		if err != nil {
			return nil, fmt.Errorf("%s/%s on %s: %w", sc, name, cfg.Store, err)
		}
		r := &run{cfg: cfg, scenario: sc, sys: sys, prefix: fmt.Sprintf("%s%s:%s:%s:k", e.prefix, cfg.Store, sc, name), tr: newTracker()}
		if progress != nil {
			r.progress = progress
		}
		r.setupWorkers()
		runs = append(runs, r)
	}
	per := max(cfg.Duration/time.Duration(cfg.TxRounds), time.Millisecond)
	// A first round is not measured: in it each system prepares its
	// statements on the pools' connections and fills its runtime, which
	// would otherwise slow the first measured round of each. Its keys and
	// rows count in the checks.
	for _, r := range runs {
		if err := r.measure(ctx, per); err != nil {
			return nil, err
		}
		r.forgetWindows()
	}
	for range cfg.TxRounds {
		for _, r := range runs {
			if err := r.measure(ctx, per); err != nil {
				return nil, err
			}
		}
	}
	out := make([]Result, 0, len(runs))
	for _, r := range runs {
		res := r.result()
		if s, ok := r.sys.(*txSystem); ok {
			rc, err := checkRows(ctx, r, s)
			if err != nil {
				return nil, err
			}
			res.Rows = rc
		}
		out = append(out, res)
	}
	addRoundRatios(out)
	return out, nil
}

// addRoundRatios sets, on the row of each scenario's ratio subject, its
// ratio to each other system's throughput round by round.
func addRoundRatios(results []Result) {
	for i := range results {
		r := &results[i]
		if r.System != ratioSubject(r.Scenario) || len(r.RoundThroughputs) == 0 {
			continue
		}
		for _, o := range results {
			if o.Scenario != r.Scenario || o.System == r.System || len(o.RoundThroughputs) != len(r.RoundThroughputs) {
				continue
			}
			rs := make([]float64, len(r.RoundThroughputs))
			for k, v := range r.RoundThroughputs {
				rs[k] = v / o.RoundThroughputs[k]
			}
			if r.RoundRatios == nil {
				r.RoundRatios = map[string][]float64{}
			}
			r.RoundRatios[o.System] = rs
		}
	}
}

// openWorkPool opens the pool the tx scenarios' functions write on, sized
// as the store's.
func openWorkPool(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pool, _, err := openPostgres(ctx, cfg)
	return pool, err
}

// warmPool opens every connection pool may hold, at once, so that no
// measured run pays for connecting.
func warmPool(ctx context.Context, pool *pgxpool.Pool) error {
	n := int(pool.Config().MaxConns)
	conns := make(chan *pgxpool.Conn, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c, err := pool.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			conns <- c
		})
	}
	wg.Wait()
	close(conns)
	for c := range conns {
		c.Release()
	}
	close(errs)
	return <-errs // nil when none failed
}
