package kafkatx_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/consume/kafka/kafkatx"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/kafkatest"
	"github.com/idemrt/idem/store/pgstore"
)

const (
	topic = "credits"
	group = "ledger"
	dlt   = "credits-dlt"
)

const childLease = time.Second // the idem lease, in the children and the tests

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), idemtest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// env is a test's world: a cluster with the topic, a database of the
// test's own with the store's table and an "applied" table (no unique
// constraint: nothing but the transaction keeps a record from applying
// twice), a pool for the handlers' work.
type env struct {
	kc   *kafkatest.Cluster
	prod *kgo.Client
	adm  *kadm.Client
	dsn  string
	work *pgxpool.Pool
}

func newEnv(t *testing.T, partitions int32) *env {
	t.Helper()
	ctx := testCtx(t)
	e := &env{kc: kafkatest.Start(t, partitions, topic, dlt), dsn: shared.NewDatabase(t)}
	var err error
	e.prod, err = kgo.NewClient(kgo.SeedBrokers(e.kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.prod.Close)
	e.adm = kadm.NewClient(e.prod)
	e.work = newPool(t, e.dsn)
	st, err := pgstore.New(ctx, e.work, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := e.work.Exec(ctx, `CREATE TABLE applied (id bigserial PRIMARY KEY, key text NOT NULL);
		CREATE TABLE blocked (key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return e
}

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// start runs a member in this process until the end of the test.
func (e *env) start(t *testing.T, opts kafka.Options, h kafkatx.HandlerFunc) {
	t.Helper()
	ctx := testCtx(t)
	st, err := pgstore.New(ctx, newPool(t, e.dsn), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rt := idemtest.Runtime(t, idem.Options{Store: st, Policy: idem.Policy{Lease: childLease}})
	opts.Consumer, err = consume.New(consume.Options{Runtime: rt, MinDelay: 20 * time.Millisecond,
		MaxDelay: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	opts.Group, opts.Topics, opts.CommitInterval = group, []string{topic}, 50*time.Millisecond
	opts.Logger = slog.New(slog.DiscardHandler)
	c, err := kafkatx.New(ctx, e.work, h, opts, kafkatest.GroupOpts(e.kc.Addrs)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// produce writes a record keyed key to partition, copies times.
func (e *env) produce(t testing.TB, partition int32, key string, copies int) {
	t.Helper()
	for range copies {
		r := &kgo.Record{Topic: topic, Partition: partition, Value: []byte("credit " + key),
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: []byte(key)}}}
		if err := e.prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// allCommitted waits until every partition's committed offset is its end.
func (e *env) allCommitted(t testing.TB, partitions int32) {
	t.Helper()
	idemtest.Eventually(t, "every record committed", func() bool {
		os, err := e.adm.FetchOffsets(testCtx(t), group)
		if err != nil {
			return false
		}
		ends, err := e.adm.ListEndOffsets(testCtx(t), topic)
		if err != nil {
			return false
		}
		for p := range partitions {
			o, ok := os.Lookup(topic, p)
			end, _ := ends.Lookup(topic, p)
			if !ok || o.Err != nil || o.At != end.Offset {
				return false
			}
		}
		return true
	})
}

// applied returns the rows key applied.
func (e *env) applied(t testing.TB, key string) int {
	t.Helper()
	var n int
	if err := e.work.QueryRow(testCtx(t), `SELECT count(*) FROM applied WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// apply is the tests' handler: a row in applied.
func apply(ctx context.Context, tx pgx.Tx, r *kafka.Record) error {
	_, err := tx.Exec(ctx, `INSERT INTO applied (key) VALUES ($1)`, r.Key)
	return err
}

func brokers(e *env) string { return strings.Join(e.kc.Addrs, ",") }
