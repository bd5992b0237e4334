package sqs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/sqs"
	"github.com/idemrt/idem/internal/sqstest"
)

// exampleQueue creates a queue on the tests' emulator and returns a
// client of it (an *sqs.Client, as sqs.NewFromConfig gives) and its URL.
func exampleQueue(name string) (*awssqs.Client, string) {
	client := sqstest.Client(emu.URL)
	out, err := client.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		panic(err)
	}
	return client, aws.ToString(out.QueueUrl)
}

// sendKeyed sends body with key in the Idempotency-Key attribute.
func sendKeyed(client *awssqs.Client, queueURL, key, body string) {
	_, err := client.SendMessage(context.Background(), &awssqs.SendMessageInput{
		QueueUrl: aws.String(queueURL), MessageBody: aws.String(body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			sqs.KeyAttribute: {DataType: aws.String("String"), StringValue: aws.String(key)},
		},
	})
	if err != nil {
		panic(err)
	}
}

// A producer sent order-1 twice (it retried after a timeout): Run charges
// it once and deletes both copies.
func ExampleAdapter_Run() {
	client, queueURL := exampleQueue("example-run")
	sendKeyed(client, queueURL, "order-1", "charge 42.00")
	sendKeyed(client, queueURL, "order-1", "charge 42.00")

	ctx, cancel := context.WithCancel(context.Background())
	rt, err := idem.New(idem.Options{}) // a shared store (redisstore, pgstore) across instances
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	c, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		panic(err)
	}
	var charges atomic.Int32
	a, err := sqs.New(sqs.Options{
		Consumer: c,
		Client:   client,
		QueueURL: queueURL,
		WaitTime: time.Second,
		Logger:   slog.New(slog.DiscardHandler),
		Handler: func(ctx context.Context, m *sqs.Message) error {
			charges.Add(1) // the effect: idem.Permanent(err) for a declined card
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	for queued(client, queueURL) > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	fmt.Println(<-done)
	fmt.Println("charges:", charges.Load())
	// Output:
	// context canceled
	// charges: 1
}

// A receive loop of your own hands each message to Process.
func ExampleAdapter_Process() {
	client, queueURL := exampleQueue("example-process")
	sendKeyed(client, queueURL, "order-7", "charge 9.99")
	sendKeyed(client, queueURL, "order-7", "charge 9.99")

	rt, err := idem.New(idem.Options{})
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	c, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		panic(err)
	}
	a, err := sqs.New(sqs.Options{Consumer: c, Client: client, QueueURL: queueURL,
		Logger: slog.New(slog.DiscardHandler),
		Handler: func(ctx context.Context, m *sqs.Message) error {
			fmt.Println("charging", m.Key, m.Body())
			return nil
		}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 2 {
		out, err := client.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
			QueueUrl:              aws.String(queueURL),
			MaxNumberOfMessages:   1,
			WaitTimeSeconds:       1,
			VisibilityTimeout:     int32(sqs.DefaultVisibilityTimeout / time.Second),
			MessageAttributeNames: []string{sqs.KeyAttribute},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{
				types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			panic(err)
		}
		for _, m := range out.Messages {
			v, err := a.Process(ctx, m)
			fmt.Println(v.Decision, v.Outcome, err)
		}
	}
	// Output:
	// charging order-7 charge 9.99
	// ack executed <nil>
	// ack replayed <nil>
}

// queued is how many messages the queue holds, visible or in flight.
func queued(client *awssqs.Client, queueURL string) int {
	out, err := client.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(queueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		panic(err)
	}
	var n int
	fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &n)
	return n
}
