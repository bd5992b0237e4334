package sqs_test

// The crash test re-executes this test binary as a consumer process on
// the test's emulator and a shared Redis; the child makes the effect of
// one message and is SIGKILLed in the middle of its handler. Effects are
// counters in Redis, counted outside the processes.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/sqs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/internal/sqstest"
	"github.com/idemrt/idem/store/redisstore"
)

const (
	envChild = "IDEM_SQS_CHILD" // set in the child: the queue URL
	envSQS   = "IDEM_SQS_ENDPOINT"
	envRedis = "IDEM_SQS_REDIS"
	envBlock = "IDEM_SQS_BLOCK" // the key whose handler blocks after its effect
)

const (
	crashLease      = 2 * time.Second // the idem lease, in the child and the test
	crashVisibility = 1               // the queue's visibility timeout, seconds
	midHandler      = "mid-handler"   // the child's line once the blocking effect is made
)

// childMain runs a consumer process until it is killed.
func childMain() int {
	if err := runChild(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return 0
}

func runChild() error {
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rc.Close()
	rt, err := crashRuntime(ctx, rc)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	c, err := consume.New(consume.Options{Runtime: rt, Logger: quiet})
	if err != nil {
		return err
	}
	block := os.Getenv(envBlock)
	a, err := sqs.New(sqs.Options{Consumer: c, Client: sqstest.Client(os.Getenv(envSQS)), QueueURL: os.Getenv(envChild),
		VisibilityTimeout: crashVisibility * time.Second, WaitTime: time.Second, Logger: quiet,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			if err := rc.Incr(ctx, "effect:"+m.Key).Err(); err != nil {
				return err
			}
			if m.Key == block {
				fmt.Println(midHandler)
				select {} // until killed
			}
			return nil
		}})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

func crashRuntime(ctx context.Context, rc *redis.Client) (*idem.Runtime, error) {
	st, err := redisstore.New(ctx, rc, redisstore.Options{KeyPrefix: "idem:"})
	if err != nil {
		return nil, err
	}
	return idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: crashLease}})
}

// A consumer process killed (SIGKILL) in the middle of a handler, after
// its effect: the message becomes visible after its visibility timeout,
// the test's consumer receives it and waits (or gives it back) until the
// dead run's lease ends, then runs it again. That message's effect
// happens twice at most (the killed run's and the rerun's, as nothing
// recorded the first); every other message's once.
func TestConsumerKilledMidHandler(t *testing.T) {
	e := newEnv(t, crashVisibility, nil)
	srv := redistest.Start(t, redistest.Options{})
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rc.Close() })
	const blocked = "order-crash"
	keys := []string{"order-1", "order-2", "order-3", "order-4", blocked}
	for _, k := range keys {
		e.send(t, k, "charge "+k)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+e.url, envSQS+"="+emu.URL, envRedis+"="+srv.Addr, envBlock+"="+blocked)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	mid := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == midHandler {
				close(mid)
				break
			}
		}
		for sc.Scan() { // drain until the child dies
		}
	}()
	select {
	case <-mid:
	case <-time.After(idemtest.Timeout):
		t.Fatal("the child never reached the middle of its handler")
	}
	// The others are done (deleted) before the kill: only the blocked
	// message is left.
	idemtest.Eventually(t, "the other messages deleted", func() bool { return e.count(t) == 1 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	rt, err := crashRuntime(testCtx(t), rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(context.Background()) })
	c := consumer(t, idem.Options{}, consume.Options{Runtime: rt})
	a := e.adapter(t, sqs.Options{Consumer: c, VisibilityTimeout: crashVisibility * time.Second,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			return rc.Incr(ctx, "effect:"+m.Key).Err()
		}})
	run(t, a)
	idemtest.Eventually(t, "the killed message handled and deleted", func() bool { return e.count(t) == 0 })
	for _, k := range keys {
		n, err := rc.Get(context.Background(), "effect:"+k).Int()
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		want := 1
		if k == blocked {
			want = 2
		}
		if n < 1 || n > want {
			t.Errorf("%s: %d effects, want 1..%d", k, n, want)
		}
		t.Logf("%s: %d effects", k, n)
	}
}
