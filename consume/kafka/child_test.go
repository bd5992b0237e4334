package kafka_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/kafkatest"
	"github.com/idemrt/idem/store/redisstore"
)

// The crash tests re-execute this test binary as group members of the
// test's kfake cluster, each on an idem runtime with a Redis store. Each
// effect is an INCR of <prefix>effect:<key> in that Redis, outside the
// store's keys, so a killed member's effects are counted too.

const (
	envChild   = "IDEM_KAFKA_CHILD"   // the child's id
	envBrokers = "IDEM_KAFKA_BROKERS" // the cluster, comma-separated
	envRedis   = "IDEM_KAFKA_REDIS"   // the Redis server
	envPrefix  = "IDEM_KAFKA_PREFIX"  // the test's Redis key prefix
	envBlock   = "IDEM_KAFKA_BLOCK"   // a key whose handler blocks after its effect
	envAfter   = "IDEM_KAFKA_AFTER"   // a key that blocks after its result is stored
)

// childLease is the children's idem lease: a killed member's keys are
// taken over that long after its last renewal.
const childLease = time.Second

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
	prefix, block, after := os.Getenv(envPrefix), os.Getenv(envBlock), os.Getenv(envAfter)
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv(envRedis)})
	defer rc.Close()
	st, err := redisstore.New(ctx, rc, redisstore.Options{KeyPrefix: prefix + "idem:"})
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
	c, err := kafka.New(kafka.Options{
		Consumer: cc, Group: group, Topics: []string{topic}, CommitInterval: 50 * time.Millisecond,
		Handler: func(ctx context.Context, r *kafka.Record) error {
			if err := rc.Incr(ctx, prefix+"effect:"+r.Key).Err(); err != nil {
				return err
			}
			if r.Key == block {
				rc.RPush(ctx, prefix+"blocked", r.Key)
				select {} // until killed
			}
			return nil
		},
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			if r.Key == after && v.Decision == consume.Ack {
				rc.RPush(context.Background(), prefix+"blocked", r.Key)
				select {} // stored, not committed: until killed
			}
		},
	}, kafkatest.GroupOpts(strings.Split(os.Getenv(envBrokers), ","))...)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Run(ctx)
}
