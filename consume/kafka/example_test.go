package kafka_test

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
)

// A consumer that ships orders: each order is produced twice (a producer
// retry), and shipped once. The cluster is kfake, in process.
func ExampleNew() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		log.Fatal(err)
	}
	defer prod.Close()
	for _, id := range []string{"order-1", "order-2", "order-1", "order-2"} {
		r := &kgo.Record{Topic: "orders", Value: []byte(id),
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: []byte(id)}}}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	rt, err := idem.New(idem.Options{}) // in-memory store
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(context.Background())
	cc, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		log.Fatal(err)
	}

	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	var seen atomic.Int32
	c, err := kafka.New(kafka.Options{
		Consumer: cc,
		Group:    "shipping",
		Topics:   []string{"orders"},
		Handler: func(ctx context.Context, r *kafka.Record) error {
			fmt.Println("shipping", r.Key)
			return nil
		},
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			fmt.Println(r.Key, v.Decision, v.Outcome)
			if seen.Add(1) == 4 {
				stop()
			}
		},
	}, kgo.SeedBrokers(brokers...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// shipping order-1
	// order-1 ack executed
	// shipping order-2
	// order-2 ack executed
	// order-1 ack replayed
	// order-2 ack replayed
}
