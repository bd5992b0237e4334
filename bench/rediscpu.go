package main

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// RedisCPU is the Redis server's CPU spent during one system's run of a
// scenario, from INFO cpu and INFO commandstats read before and after the
// measured part of the run; on Redis Cluster, summed over the masters.
// Server CPU includes the server's own background work, such as expiring
// keys.
type RedisCPU struct {
	// PerRequestUS is µs of server CPU (used_cpu_sys + used_cpu_user) per
	// call of the run.
	PerRequestUS float64 `json:"per_request_us"`
	// StatsPerRequestUS is µs per call of the run that commandstats
	// charges to the commands the clients sent: when scripts ran, the
	// scripts' usec (which includes the commands they call) plus SET's
	// (redisstore's scripts never call SET: they write with PSETEX and
	// SETRANGE; a SET is a liveness beat, or, in versions before the claim
	// script read the fence floor from the server's clock, the claim of a
	// new key, sent as a plain SET NX); otherwise every command's. It leaves out background work, and, when scripts ran, the
	// usec of the few other commands sent besides them (SUBSCRIBE for
	// wake-ups): commandstats cannot tell those from the commands scripts
	// call.
	StatsPerRequestUS float64 `json:"stats_per_request_us"`
	// ScriptCalls and PerScriptCallUS are the calls of EVALSHA, EVAL and
	// FCALL (and their _RO forms) and their mean cost in µs, from
	// commandstats; the cost includes the commands a script calls.
	ScriptCalls     int64   `json:"script_calls"`
	PerScriptCallUS float64 `json:"per_script_call_us,omitempty"`
	// CommandCalls and PerCommandUS are the same for every other command
	// (those scripts call included), except the connections' housekeeping
	// (INFO, HELLO, PING, CLUSTER, CLIENT, CONFIG and SCRIPT subcommands).
	CommandCalls int64   `json:"command_calls"`
	PerCommandUS float64 `json:"per_command_us,omitempty"`
}

// redisSnap is one reading of INFO cpu and commandstats.
type redisSnap struct {
	cpuSec float64
	calls  map[string]int64
	usec   map[string]int64
}

func newRedisSnap() *redisSnap {
	return &redisSnap{calls: map[string]int64{}, usec: map[string]int64{}}
}

// add adds o's readings to s.
func (s *redisSnap) add(o *redisSnap) {
	s.cpuSec += o.cpuSec
	for cmd, n := range o.calls {
		s.calls[cmd] += n
	}
	for cmd, n := range o.usec {
		s.usec[cmd] += n
	}
}

// readRedisSnap reads INFO cpu and INFO commandstats from client: from
// every master, summed, when it is a cluster client.
func readRedisSnap(ctx context.Context, client redis.UniversalClient) (*redisSnap, error) {
	cc, ok := client.(*redis.ClusterClient)
	if !ok {
		return readNodeSnap(ctx, client)
	}
	total := newRedisSnap()
	var mu sync.Mutex
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		s, err := readNodeSnap(ctx, c)
		if err == nil {
			mu.Lock()
			total.add(s)
			mu.Unlock()
		}
		return err
	})
	return total, err
}

// infoer is a client of one node, or any client for single-node Redis.
type infoer interface {
	Info(ctx context.Context, section ...string) *redis.StringCmd
}

// readNodeSnap reads INFO cpu and INFO commandstats from one node.
func readNodeSnap(ctx context.Context, client infoer) (*redisSnap, error) {
	cpu, err := client.Info(ctx, "cpu").Result()
	if err != nil {
		return nil, err
	}
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	s := newRedisSnap()
	for _, line := range strings.Split(cpu+"\n"+stats, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			s.cpuSec += f
		case strings.HasPrefix(k, "cmdstat_"):
			s.addCmdStat(strings.TrimPrefix(k, "cmdstat_"), v)
		}
	}
	return s, nil
}

// addCmdStat reads one commandstats line's value:
// "calls=N,usec=N,usec_per_call=F,...".
func (s *redisSnap) addCmdStat(cmd, v string) {
	for _, f := range strings.Split(v, ",") {
		name, val, _ := strings.Cut(f, "=")
		n, _ := strconv.ParseInt(val, 10, 64)
		switch name {
		case "calls":
			s.calls[cmd] += n
		case "usec":
			s.usec[cmd] += n
		}
	}
}

func isScriptCmd(cmd string) bool {
	switch cmd {
	case "evalsha", "eval", "fcall", "evalsha_ro", "eval_ro", "fcall_ro":
		return true
	}
	return false
}

// isHousekeeping reports whether commandstats' cmd is one that clients send
// to manage connections, not to serve requests: the harness's INFO, the
// cluster client's CLUSTER SLOTS, the pools' HELLO and CLIENT SETINFO, PING,
// CONFIG GET and SCRIPT LOAD. Redis 7 names subcommands "cluster|slots",
// "client|setinfo", "config|get", "script|load".
func isHousekeeping(cmd string) bool {
	switch cmd {
	case "hello", "info", "ping", "cluster", "client", "config", "script":
		return true
	}
	for _, p := range []string{"cluster|", "client|", "config|", "script|"} {
		if strings.HasPrefix(cmd, p) {
			return true
		}
	}
	return false
}

// redisCPUSince returns the server CPU between before and after, for a run
// of calls calls, or nil when a counter went backwards: the server
// restarted, or someone ran CONFIG RESETSTAT, during the run.
func redisCPUSince(before, after *redisSnap, calls int64) *RedisCPU {
	if after.cpuSec < before.cpuSec {
		return nil
	}
	for cmd, n := range before.calls {
		if after.calls[cmd] < n || after.usec[cmd] < before.usec[cmd] {
			return nil
		}
	}
	c := &RedisCPU{}
	if calls > 0 {
		c.PerRequestUS = (after.cpuSec - before.cpuSec) * 1e6 / float64(calls)
	}
	var scriptUS, cmdUS, setUS int64
	for cmd, n := range after.calls {
		if isHousekeeping(cmd) {
			continue
		}
		dn, du := n-before.calls[cmd], after.usec[cmd]-before.usec[cmd]
		if isScriptCmd(cmd) {
			c.ScriptCalls, scriptUS = c.ScriptCalls+dn, scriptUS+du
		} else {
			c.CommandCalls, cmdUS = c.CommandCalls+dn, cmdUS+du
		}
		if cmd == "set" {
			setUS = du
		}
	}
	if c.ScriptCalls > 0 {
		c.PerScriptCallUS = float64(scriptUS) / float64(c.ScriptCalls)
	}
	if c.CommandCalls > 0 {
		c.PerCommandUS = float64(cmdUS) / float64(c.CommandCalls)
	}
	if calls > 0 {
		top := scriptUS + setUS
		if c.ScriptCalls == 0 {
			top = cmdUS
		}
		c.StatsPerRequestUS = float64(top) / float64(calls)
	}
	return c
}

// redisMeter reads the server's CPU around the measured part of a run, on
// a client of its own.
type redisMeter struct {
	client redis.UniversalClient
	before *redisSnap
	err    error
}

// newRedisMeter returns a meter for runs on e's store, or nil when that
// store is not Redis.
func newRedisMeter(e *env) *redisMeter {
	if e.cfg.Store != "redis" && e.cfg.Store != "redis-cluster" {
		return nil
	}
	return &redisMeter{client: e.redisClient()}
}

// start takes the reading the run is measured from; a later call replaces
// it (the replay scenario starts measuring after its warm-up).
func (m *redisMeter) start(ctx context.Context) {
	if m == nil {
		return
	}
	m.before, m.err = readRedisSnap(ctx, m.client)
}

// stop returns the server CPU since start for calls calls, or nil when a
// reading failed.
func (m *redisMeter) stop(ctx context.Context, calls int64) *RedisCPU {
	if m == nil || m.err != nil || m.before == nil {
		return nil
	}
	after, err := readRedisSnap(ctx, m.client)
	if err != nil {
		return nil
	}
	return redisCPUSince(m.before, after, calls)
}

func (m *redisMeter) close() {
	if m != nil {
		m.client.Close()
	}
}
