package main

import (
	"math"
	"testing"
)

// redisCPUSince splits commandstats into script calls and other commands,
// leaves out INFO, and divides the server CPU by the calls of the run; per
// request, the scripts count with the SETs sent beside them.
func TestRedisCPUSince(t *testing.T) {
	before := &redisSnap{cpuSec: 1.5, calls: map[string]int64{}, usec: map[string]int64{}}
	before.addCmdStat("evalsha", "calls=10,usec=100,usec_per_call=10.00,rejected_calls=0,failed_calls=0")
	before.addCmdStat("info", "calls=1,usec=50,usec_per_call=50.00")
	after := &redisSnap{cpuSec: 1.502, calls: map[string]int64{}, usec: map[string]int64{}}
	after.addCmdStat("evalsha", "calls=30,usec=500,usec_per_call=16.67")
	after.addCmdStat("fcall", "calls=10,usec=200,usec_per_call=20.00")
	after.addCmdStat("set", "calls=40,usec=80,usec_per_call=2.00")
	after.addCmdStat("info", "calls=3,usec=150,usec_per_call=50.00")
	after.addCmdStat("cluster", "calls=2,usec=900,usec_per_call=450.00")
	c := redisCPUSince(before, after, 100)
	if math.Abs(c.PerRequestUS-20) > 1e-6 || c.ScriptCalls != 30 || c.PerScriptCallUS != 20 ||
		c.CommandCalls != 40 || c.PerCommandUS != 2 || c.StatsPerRequestUS != 6.8 {
		t.Fatalf("%+v", c)
	}
	// Without scripts, every command counts per request.
	plain := newRedisSnap()
	plain.addCmdStat("set", "calls=40,usec=80")
	plain.addCmdStat("get", "calls=10,usec=20")
	if c := redisCPUSince(newRedisSnap(), plain, 50); c.StatsPerRequestUS != 2 || c.ScriptCalls != 0 {
		t.Fatalf("no scripts: %+v", c)
	}
}

// Counters that went backwards (a restart, CONFIG RESETSTAT) give no
// reading rather than a negative one.
func TestRedisCPUSinceReset(t *testing.T) {
	before, after := newRedisSnap(), newRedisSnap()
	before.cpuSec, after.cpuSec = 1, 2
	before.addCmdStat("evalsha", "calls=30,usec=300")
	after.addCmdStat("evalsha", "calls=5,usec=50")
	if c := redisCPUSince(before, after, 10); c != nil {
		t.Fatalf("after a reset: %+v", c)
	}
	before, after = newRedisSnap(), newRedisSnap()
	before.cpuSec, after.cpuSec = 5, 0.1
	if c := redisCPUSince(before, after, 10); c != nil {
		t.Fatalf("after a restart: %+v", c)
	}
}

// A cluster's reading is the sum of its masters'.
func TestRedisSnapAdd(t *testing.T) {
	a, b := newRedisSnap(), newRedisSnap()
	a.cpuSec, b.cpuSec = 1, 2
	a.addCmdStat("evalsha", "calls=3,usec=30")
	b.addCmdStat("evalsha", "calls=4,usec=40")
	b.addCmdStat("set", "calls=1,usec=1")
	a.add(b)
	if a.cpuSec != 3 || a.calls["evalsha"] != 7 || a.usec["evalsha"] != 70 || a.calls["set"] != 1 {
		t.Fatalf("%+v", a)
	}
}

// Redis 7 names subcommands "cluster|slots", "client|setinfo": the
// connections' housekeeping counts neither in the commands nor per request.
func TestRedisCPUSinceHousekeeping(t *testing.T) {
	after := newRedisSnap()
	after.addCmdStat("set", "calls=40,usec=80")
	for _, cmd := range []string{"hello", "info", "ping", "cluster|slots", "cluster|shards", "client|setinfo",
		"client|setname", "config|get", "script|load"} {
		after.addCmdStat(cmd, "calls=7,usec=7000")
	}
	c := redisCPUSince(newRedisSnap(), after, 40)
	if c.CommandCalls != 40 || c.PerCommandUS != 2 || c.StatsPerRequestUS != 2 {
		t.Fatalf("%+v", c)
	}
	for _, cmd := range []string{"get", "set", "evalsha", "clientx", "psetex"} {
		if isHousekeeping(cmd) {
			t.Errorf("%s counted as housekeeping", cmd)
		}
	}
}
