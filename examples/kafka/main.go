// Command kafka shows consume/kafka on an in-process Kafka cluster (kfake,
// over TCP on loopback): a producer writes every order twice (a retry
// after a lost acknowledgement) and once more to another partition, plus
// one order the handler refuses; two members of one consumer group ship
// the orders, the second joining halfway (a rebalance); every order is
// shipped once, the refused one goes to the dead-letter topic, and every
// offset is committed.
//
//	go run ./examples/kafka   (or make kafka)
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/store/memstore"
)

const (
	topic      = "orders"
	deadLetter = "orders-dlt"
	group      = "shipping"
	partitions = 3
	numOrders  = 12
	refused    = "order-13" // the handler refuses it: a permanent error
)

func main() {
	shipped, err := run()
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range orders() {
		if shipped[id] != 1 {
			fmt.Printf("FAIL: %s shipped %d times\n", id, shipped[id])
			os.Exit(1)
		}
	}
	fmt.Println("every order shipped once")
}

func orders() []string {
	out := make([]string, numOrders)
	for i := range out {
		out[i] = fmt.Sprintf("order-%d", i+1)
	}
	return out
}

// run runs the example and returns how many times each order shipped.
func run() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic, deadLetter),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	produced := 0
	for i, id := range append(orders(), refused) {
		for _, p := range []int32{int32(i % partitions), int32(i % partitions), int32((i + 1) % partitions)} {
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("ship " + id),
				Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: []byte(id)}}}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				return nil, err
			}
			produced++
		}
	}
	fmt.Printf("produced %d records: %d orders, each twice to one partition and once to another, and %s\n",
		produced, numOrders, refused)

	var (
		mu      sync.Mutex
		shipped = map[string]int{}
		answers = map[string]int{}
	)
	joined := make(chan struct{}) // closed once the second member is in the group
	handler := func(ctx context.Context, r *kafka.Record) error {
		if r.Key == refused {
			return idem.Permanent(errors.New("no such address"))
		}
		mu.Lock()
		half := len(shipped) >= numOrders/2
		mu.Unlock()
		if half { // the second half waits for the second member: a rebalance mid-run
			select {
			case <-joined:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		time.Sleep(20 * time.Millisecond) // the carrier's API
		mu.Lock()
		shipped[r.Key]++
		mu.Unlock()
		return nil
	}
	onVerdict := func(r *kafka.Record, v consume.Verdict) {
		mu.Lock()
		answers[v.Decision.String()+"/"+v.Outcome.String()]++
		mu.Unlock()
	}

	// Two members, each with a runtime of its own on one store (one
	// process here; a redisstore or pgstore across processes).
	st := memstore.New(memstore.Options{})
	quiet := slog.New(slog.DiscardHandler)
	var runtimes []*idem.Runtime // closed after the members
	member := func(name string) (*kafka.Consumer, error) {
		rt, err := idem.New(idem.Options{Store: st})
		if err != nil {
			return nil, err
		}
		runtimes = append(runtimes, rt)
		cc, err := consume.New(consume.Options{Runtime: rt, Logger: quiet})
		if err != nil {
			return nil, err
		}
		return kafka.New(kafka.Options{Consumer: cc, Group: group, Topics: []string{topic},
			DeadLetterTopic: deadLetter, Handler: handler, OnVerdict: onVerdict,
			CommitInterval: 100 * time.Millisecond, Logger: quiet},
			kgo.SeedBrokers(brokers...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.FetchMaxWait(100*time.Millisecond), kgo.ClientID(name))
	}
	a, err := member("a")
	if err != nil {
		return nil, err
	}
	b, err := member("b")
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Go(func() { errs <- a.Run(ctx) })
	for { // the second member joins once the first is halfway
		mu.Lock()
		n := len(shipped)
		mu.Unlock()
		if n >= numOrders/2 || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Println("a second member joins the group")
	wg.Go(func() { errs <- b.Run(ctx) })
	for { // until the group has rebalanced with it
		if id, gen := b.Client().GroupMetadata(); id != "" && gen > 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(joined)
	adm := kadm.NewClient(prod)
	for !allCommitted(ctx, adm) { // the group is done when every offset is committed
		if ctx.Err() != nil {
			return nil, errors.New("not every record was committed within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	a.Close()
	b.Close()
	for _, rt := range runtimes {
		if err := rt.Close(context.Background()); err != nil {
			return nil, err
		}
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}

	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	for k := range answers {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Println("answers (decision/outcome):")
	for _, k := range kinds {
		fmt.Printf("  %-16s %d\n", k, answers[k])
	}
	if err := report(context.Background(), adm); err != nil {
		return nil, err
	}
	return shipped, nil
}

// allCommitted reports whether the group's committed offsets are the
// partitions' ends.
func allCommitted(ctx context.Context, adm *kadm.Client) bool {
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return false
	}
	for p := range int32(partitions) {
		c, ok := committed.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		if !ok || c.At != e.Offset {
			return false
		}
	}
	return true
}

// report prints the group's committed offsets against the partitions'
// ends, and the dead-letter topic's length.
func report(ctx context.Context, adm *kadm.Client) error {
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return err
	}
	ends, err := adm.ListEndOffsets(ctx, topic, deadLetter)
	if err != nil {
		return err
	}
	for p := range int32(partitions) {
		c, _ := committed.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		fmt.Printf("partition %d: committed %d of %d\n", p, c.At, e.Offset)
	}
	var dead int64
	for p := range int32(partitions) {
		e, _ := ends.Lookup(deadLetter, p)
		dead += e.Offset
	}
	fmt.Printf("dead-letter topic: %d records (%s and its copies)\n", dead, refused)
	return nil
}
