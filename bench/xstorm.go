package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// The cross-instance storm ("xstorm"): -instances runtimes of one system,
// each on its own store client (its own connection pool) over the same
// namespace of a shared store, as instances of a service behind a load
// balancer. Each round releases -xstorm callers on one new key, spread
// round-robin over the instances: one of them runs the function, the rest
// wait for its result. A duplicate's settle latency is measured from the
// moment the owner's function returned (the tracker's doneAt) to the
// duplicate's return. The scenario's settle columns count every duplicate,
// whether it waited on the owner's instance (released in-process) or on
// another one; the result also keeps the two apart (SettleOther,
// SettleSame), and the target checks the duplicates on other instances
// only: they are what the scenario is about. There are fewer callers than in the storm scenario (30 by
// default, against 1000): what it measures is how soon the news of a
// completion reaches the other instances, not how fast one process wakes
// a thousand goroutines, which the storm scenario measures.

// xstormSystems are the systems the cross-instance storm runs: idem and
// the poll baseline (the original design: a loop that claims again every
// -poll-interval).
var xstormSystems = []string{"idem", "poll"}

// runsIn reports whether system runs scenario on store: the cross-instance
// storm needs a shared store and runs xstormSystems only; the tx scenarios
// run txSystems on PostgreSQL only.
func runsIn(system, store, scenario string) bool {
	if isTxScenario(scenario) {
		return store == "postgres" && slices.Contains(txSystems, system)
	}
	if scenario != "xstorm" {
		return runsOn(system, store)
	}
	if store == "memory" {
		return false
	}
	for _, s := range xstormSystems {
		if s == system {
			return true
		}
	}
	return false
}

// xstormSkipped is the note printed in place of the cross-instance storm's
// table on store, or "" when it runs there.
func xstormSkipped(store string) string {
	if store != "memory" {
		return ""
	}
	return "skipped on the memory store: instances share nothing in memory; " +
		"run with -redis host:port, -redis-cluster or -postgres DSN"
}

// multiSystem is n instances of one system sharing a store namespace, each
// with its own client.
type multiSystem struct {
	insts []system
}

// newMultiSystem builds e.cfg.Instances instances of system name for
// scenario, on one namespace of e's shared store (on PostgreSQL, one
// table).
func newMultiSystem(name string, e *env, scenario string) (system, error) {
	if e.cfg.Store == "memory" {
		return nil, errors.New("instances need a shared store")
	}
	es := *e
	if es.cfg.Store == "postgres" {
		es.pgTable = fmt.Sprintf("idem_bench_%d_%d", time.Now().Unix(), e.tables.Add(1))
	}
	m := &multiSystem{}
	for range max(e.cfg.Instances, 1) {
		s, err := newSystem(name, &es, scenario)
		if err != nil {
			m.close()
			return nil, err
		}
		m.insts = append(m.insts, s)
	}
	return m, nil
}

func (m *multiSystem) name() string { return m.insts[0].name() }

// on returns the instance that the i-th caller of a round calls.
func (m *multiSystem) on(i int) system { return m.insts[i%len(m.insts)] }

func (m *multiSystem) do(ctx context.Context, key string, fn workFn, withOutcome bool) (receipt, outcome, error) {
	return m.insts[0].do(ctx, key, fn, withOutcome)
}

func (m *multiSystem) storeCalls() (roundTrips, ops int64) {
	for _, s := range m.insts {
		rt, o := s.storeCalls()
		roundTrips, ops = roundTrips+rt, ops+o
	}
	return roundTrips, ops
}

func (m *multiSystem) close() {
	for _, s := range m.insts {
		s.close()
	}
}

// xstorm releases -xstorm callers at once on one new key, spread over the
// instances, round after round until deadline (at least one round).
func (r *run) xstorm(ctx context.Context, deadline time.Time) {
	m, ok := r.sys.(*multiSystem)
	if !ok {
		m = &multiSystem{insts: []system{r.sys}}
	}
	ws := r.workers // setupWorkers: worker i calls instance i % instances
	for rounds := 0; rounds == 0 || time.Now().Before(deadline); rounds++ {
		id := r.nextID.Add(1)
		release := make(chan struct{})
		var wg sync.WaitGroup
		var t0 time.Time
		for i, w := range ws {
			sys := m.on(i)
			wg.Go(func() {
				<-release
				w.call(ctx, sys, r.prefix, id, true, t0)
			})
		}
		runtime.Gosched()
		t0 = time.Now()
		close(release)
		wg.Wait()
	}
}

// recordSettle records a duplicate's settle latency d; in the xstorm
// scenario (settleAny), also by where the execution it waited for ran:
// owner is 1 + that instance, as the tracker noted it.
// A negative d (doneAt overwritten by a later execution of the key) is
// recorded as 0 and counted.
func (w *worker) recordSettle(d time.Duration, owner int32) {
	if d < 0 {
		d = 0
		w.negSettle++
	}
	w.settle.record(d)
	if !w.settleAny {
		return
	}
	if owner == w.inst+1 {
		w.settleSame.record(d)
	} else {
		w.settleOther.record(d)
	}
}
