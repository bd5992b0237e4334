package flows_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

const (
	envWorker = "FLOWS_TEST_WORKER"
	envAddr   = "FLOWS_TEST_REDIS"
)

const crashLease = time.Second

// redisCheckout is the checkout flow of the crash test: each execution of a
// step is counted in Redis (outside the process), and the receipt step of
// the worker process never returns, so the test can kill it there.
func redisCheckout(c redis.UniversalClient, hang bool) *flows.Flow[Order] {
	opts := flows.StepOptions{Policy: idem.Policy{Lease: crashLease}}
	return flows.Must(flows.New("checkout",
		flows.Step("charge", func(ctx context.Context, o Order) (Order, error) {
			if err := c.RPush(ctx, "exec:charge", os.Getpid()).Err(); err != nil {
				return o, err
			}
			o.Charged = true
			return o, nil
		}).Idempotent(chargeKey, opts),
		flows.Step("receipt", func(ctx context.Context, o Order) (Order, error) {
			if err := c.RPush(ctx, "exec:receipt", os.Getpid()).Err(); err != nil {
				return o, err
			}
			if hang {
				select {} // killed here
			}
			o.Receipt = "sent"
			return o, nil
		}).Idempotent(receiptKey, opts),
	))
}

func redisRuntime(t testing.TB, addr string) (*idem.Runtime, *redis.Client) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	st, err := redisstore.New(bg, c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: crashLease}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		_ = rt.Close(ctx)
		st.Close()
		c.Close()
	})
	return rt, c
}

// runWorker is the worker process of the crash test: it runs the flow and
// hangs in its second step until it is killed.
func runWorker() bool {
	if os.Getenv(envWorker) == "" {
		return false
	}
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(envAddr)})
	st, err := redisstore.New(bg, c, redisstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: crashLease}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	_, err = redisCheckout(c, true).Run(bg, rt, Order{Invoice: "inv-crash"}, flows.RunOptions[Order]{IdempotencyKey: "req-crash", Policy: idem.Policy{Lease: crashLease}})
	fmt.Fprintln(os.Stderr, "worker: the flow returned:", err)
	os.Exit(3)
	return true
}

// A process dies in the middle of a flow (SIGKILL in its second step). A
// rerun with the same workflow key, after the leases end, skips the step
// that completed (it is replayed, not run) and runs the one that did not.
func TestCrashAndResume(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=1", envAddr+"="+srv.Addr)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	rt, c := redisRuntime(t, srv.Addr)
	idemtest.Eventually(t, "the worker to reach its second step", func() bool {
		return c.LLen(bg, "exec:receipt").Val() > 0
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	out, err := redisCheckout(c, false).Run(ctx, rt, Order{Invoice: "inv-crash"},
		flows.RunOptions[Order]{IdempotencyKey: "req-crash", Policy: idem.Policy{Lease: crashLease, Settle: 20 * time.Second}})
	if err != nil || !out.Charged || out.Receipt != "sent" {
		t.Fatalf("resumed run: %+v %v", out, err)
	}
	charges, receipts := c.LLen(bg, "exec:charge").Val(), c.LLen(bg, "exec:receipt").Val()
	if charges != 1 || receipts != 2 {
		t.Fatalf("charge ran %d times (want 1: replayed), receipt %d times (want 2: killed, then run)", charges, receipts)
	}
}
