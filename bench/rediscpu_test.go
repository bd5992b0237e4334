package main

import (
	"math"
	"testing"
)

// redisCPUSince splits commandstats into script calls and other commands,
// leaves out INFO, and divides the server CPU by the calls of the run.
func TestRedisCPUSince(t *testing.T) {
	before := &redisSnap{cpuSec: 1.5, calls: map[string]int64{}, usec: map[string]int64{}}
	before.addCmdStat("evalsha", "calls=10,usec=100,usec_per_call=10.00,rejected_calls=0,failed_calls=0")
	before.addCmdStat("info", "calls=1,usec=50,usec_per_call=50.00")
	after := &redisSnap{cpuSec: 1.502, calls: map[string]int64{}, usec: map[string]int64{}}
	after.addCmdStat("evalsha", "calls=30,usec=500,usec_per_call=16.67")
	after.addCmdStat("fcall", "calls=10,usec=200,usec_per_call=20.00")
	after.addCmdStat("set", "calls=40,usec=80,usec_per_call=2.00")
	after.addCmdStat("info", "calls=3,usec=150,usec_per_call=50.00")
	c := redisCPUSince(before, after, 100)
	if math.Abs(c.PerRequestUS-20) > 1e-6 || c.ScriptCalls != 30 || c.PerScriptCallUS != 20 ||
		c.CommandCalls != 40 || c.PerCommandUS != 2 {
		t.Fatalf("%+v", c)
	}
}
