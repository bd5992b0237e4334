package sqstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/idemrt/idem/internal/sqstest"
)

// The SDK's client, on the query protocol, does a message's round trip on
// goaws: attributes, a visibility change, a delete, and an API error.
func TestClientRoundTrip(t *testing.T) {
	defer goleak.VerifyNone(t) // after Close: the server, its periodic task and the client's connections end
	e, err := sqstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := sqstest.Start(); err == nil {
		t.Fatal("a second Start in one process succeeded")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := sqstest.Client(e.URL)
	q, err := cl.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q"),
		Attributes: map[string]string{"VisibilityTimeout": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String("body"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"Idempotency-Key": {DataType: aws.String("String"), StringValue: aws.String("k")}}}); err != nil {
		t.Fatal(err)
	}
	out, err := cl.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, WaitTimeSeconds: 1,
		MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive: %v, %v", out, err)
	}
	m := out.Messages[0]
	if aws.ToString(m.Body) != "body" || aws.ToString(m.MessageAttributes["Idempotency-Key"].StringValue) != "k" ||
		m.Attributes["ApproximateReceiveCount"] != "1" {
		t.Errorf("message %+v", m)
	}
	if _, err := cl.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q.QueueUrl,
		ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	_, err = cl.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() == "" {
		t.Errorf("deleting twice: %v, want an API error", err)
	}
}
