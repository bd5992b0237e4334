package kafkatx_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/consume/kafka/kafkatx"
	"github.com/idemrt/idem/internal/kafkatest"
	"github.com/idemrt/idem/store/pgstore"
)

// The crash test re-executes this test binary as group members, each on
// a pgstore runtime of the test's database; effects are rows of applied.

const (
	envChild   = "IDEM_KAFKATX_CHILD"   // the child's id
	envBrokers = "IDEM_KAFKATX_BROKERS" // the cluster, comma-separated
	envDSN     = "IDEM_KAFKATX_DSN"     // the test's database
	envBlock   = "IDEM_KAFKATX_BLOCK"   // a key whose handler blocks in its transaction, after its INSERT
	envAfter   = "IDEM_KAFKATX_AFTER"   // a key that blocks after its COMMIT, before its offset commit
)

func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := runChild(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return 0
}

func runChild(ctx context.Context) error {
	dsn, block, after := os.Getenv(envDSN), os.Getenv(envBlock), os.Getenv(envAfter)
	pools := make([]*pgxpool.Pool, 3) // the store's, the work's, the signals'
	for i := range pools {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return err
		}
		defer p.Close()
		pools[i] = p
	}
	signalBlocked := func(key string) {
		_, _ = pools[2].Exec(context.Background(), `INSERT INTO blocked (key) VALUES ($1)`, key)
	}
	st, err := pgstore.New(ctx, pools[0], pgstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: childLease}})
	if err != nil {
		return err
	}
	defer rt.Close(context.Background())
	cc, err := consume.New(consume.Options{Runtime: rt, Policy: idem.Policy{Settle: 300 * time.Millisecond},
		MinDelay: 50 * time.Millisecond, MaxDelay: time.Second})
	if err != nil {
		return err
	}
	c, err := kafkatx.New(ctx, pools[1], func(ctx context.Context, tx pgx.Tx, r *kafka.Record) error {
		if err := apply(ctx, tx, r); err != nil {
			return err
		}
		if r.Key == block {
			signalBlocked(r.Key)
			select {} // in the transaction, until killed
		}
		return nil
	}, kafka.Options{
		Consumer: cc, Group: group, Topics: []string{topic}, CommitInterval: 50 * time.Millisecond,
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			if r.Key == after && v.Decision == consume.Ack {
				signalBlocked(r.Key)
				select {} // committed, offset not: until killed
			}
		},
	}, kafkatest.GroupOpts(strings.Split(os.Getenv(envBrokers), ","))...)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run(ctx)
}
