package sqstest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
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

// Close ends every connection to the emulator, one a client opened but
// sent nothing on too (an SDK client's dial that its cancelled request
// left in the pool): http.Server.Shutdown leaves such a connection open
// for 5s, so the test binary's leak check found its goroutines, and Close
// took that long.
func TestCloseEndsNewConnections(t *testing.T) {
	e, err := sqstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(e.URL, "http://"))
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	defer c.Close()
	// The server has taken the connection once a request on another is
	// answered (one listener, accepting in order).
	cl := sqstest.Client(e.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cl.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		e.Close()
		t.Fatal(err)
	}
	start := time.Now()
	e.Close()
	took := time.Since(start)
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection after Close: read %v, want it closed by the server", err)
	}
	if took >= 5*time.Second {
		t.Errorf("Close took %v: it waited for the idle new connection", took)
	}
}
