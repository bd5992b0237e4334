package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
)

// The store traffic of liveness, with default settings, read from Redis's
// commandstats: three idle runtimes send one beat (SET) a second each;
// while callers on one of them wait on many keys another holds, it reads
// that instance's record (EXISTS) once a second, not once per key.
func TestLivenessTraffic(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	prefix := fmt.Sprintf("lt%d:", prefixSeq.Add(1))
	var rts []*idem.Runtime
	for range 3 {
		rts = append(rts, newRuntime(t, idem.Options{Store: newStoreWithPrefix(t, newClient(t, srv), prefix)}))
	}
	const window = 4 * time.Second
	idle := measure(t, c, window)
	t.Logf("3 idle runtimes: %.2f SET/s, %.2f EXISTS/s", idle["set"], idle["exists"])
	if idle["set"] < 2 || idle["set"] > 4.5 || idle["exists"] > 0.5 {
		t.Errorf("idle: %.2f beats/s, %.2f reads/s; want about 3 and 0", idle["set"], idle["exists"])
	}

	release := make(chan struct{})
	defer close(release)
	const keys = 50
	for i := range keys {
		started := make(chan struct{})
		idemtest.GoDo(bg, rts[0], fmt.Sprint("w", i), func(context.Context) (string, error) {
			close(started)
			<-release
			return "", nil
		})
		<-started
		idemtest.GoDo(bg, rts[1], fmt.Sprint("w", i), idemtest.MustNotRun(t), idem.WithSettle(time.Minute))
	}
	idemtest.Eventually(t, "the waiters parked", func() bool { return rts[1].Stats().Waiters == keys })
	busy := measure(t, c, window)
	t.Logf("the same, %d callers on one waiting for %d keys of another: %.2f EXISTS/s",
		keys, keys, busy["exists"])
	if busy["exists"] < 0.5 || busy["exists"] > 2 {
		t.Errorf("%.2f liveness reads/s for one instance waited on; want about 1", busy["exists"])
	}
}

// measure returns the calls per second of each Redis command over d.
func measure(t *testing.T, c *redis.Client, d time.Duration) map[string]float64 {
	before := cmdCalls(t, c)
	time.Sleep(d)
	after := cmdCalls(t, c)
	out := map[string]float64{}
	for cmd, n := range after {
		out[cmd] = float64(n-before[cmd]) / d.Seconds()
	}
	return out
}

func cmdCalls(t *testing.T, c *redis.Client) map[string]int64 {
	info, err := c.Info(bg, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(k, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		out[cmd], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}
