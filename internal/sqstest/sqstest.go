// Package sqstest runs an SQS emulator in the test process for the tests
// of consume/sqs: goaws (github.com/Admiral-Piett/goaws), served over
// HTTP on a free loopback port, so that child processes of a test reach
// it too, with clients of the real SDK (aws-sdk-go-v2) that speak to it.
//
// goaws speaks SQS's query protocol (form-encoded requests, XML answers),
// which the SDK no longer uses by default (it sends the JSON protocol);
// [Client] sets the SDK's own query protocol (smithy-go's awsquery) on
// the client instead.
//
// What goaws does not do, and the tests must not expect: visibility
// timeouts are whole seconds, made visible again by a periodic task (every
// 50ms here); the VisibilityTimeout of a ReceiveMessage is ignored (the
// queue's applies); ApproximateReceiveCount is always 1; no
// ChangeMessageVisibilityBatch; MessageDeduplicationId is not returned
// as a system attribute; its state is global, so there is one emulator
// per process ([Start] refuses a second).
package sqstest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/Admiral-Piett/goaws/app"
	"github.com/Admiral-Piett/goaws/app/gosqs"
	"github.com/Admiral-Piett/goaws/app/router"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsquery"
	"github.com/sirupsen/logrus"
)

// AccountID is the emulator's account, in its queue URLs and ARNs.
const AccountID = "100010001000"

// Region is the region its clients sign for (goaws checks no signature).
const Region = "us-east-1"

// Emulator is the process's goaws.
type Emulator struct {
	// URL is its endpoint, http://127.0.0.1:<port>.
	URL string

	srv  *http.Server
	quit chan struct{}
	done sync.WaitGroup
}

var started struct {
	sync.Mutex
	on bool
}

// Start starts goaws on a free loopback port, with its periodic task
// (visibility timeouts that run out, redrive to dead-letter queues) every
// 50ms. Close stops both. goaws keeps its queues in globals: a second
// Start before Close is an error.
func Start() (*Emulator, error) {
	started.Lock()
	defer started.Unlock()
	if started.on {
		return nil, errors.New("sqstest: goaws is already running in this process (its state is global)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	logrus.SetOutput(io.Discard)
	app.CurrentEnvironment = app.Environment{
		Host: host, Port: port, AccountID: AccountID,
		QueueAttributeDefaults: app.EnvQueueAttributes{VisibilityTimeout: 30},
	}
	e := &Emulator{URL: "http://" + ln.Addr().String(), quit: make(chan struct{})}
	e.srv = &http.Server{Handler: serialize(router.New()), ReadHeaderTimeout: 10 * time.Second}
	e.done.Add(2)
	go func() {
		defer e.done.Done()
		_ = e.srv.Serve(ln)
	}()
	go func() {
		defer e.done.Done()
		gosqs.PeriodicTasks(50*time.Millisecond, e.quit)
	}()
	started.on = true
	return e, nil
}

// Close stops the emulator and its periodic task, and waits for them. It
// closes every connection at once, whatever its state: Shutdown would
// leave one that a client opened and sent nothing on (an SDK client's
// dial that its cancelled request left in its pool) open for 5s, and a
// long poll in flight for its wait; their goroutines, the server's and
// the client's, would outlive Close. A request in flight ends with its
// connection (goaws's long poll watches its context).
func (e *Emulator) Close() {
	_ = e.srv.Close()
	close(e.quit)
	e.done.Wait()
	started.Lock()
	started.on = false
	started.Unlock()
}

// serialize runs the actions that change goaws's map of queues alone:
// several of its handlers read that map without its lock, which the race
// detector would report (and which could fault) while a queue is created.
func serialize(h http.Handler) http.Handler {
	var mu sync.RWMutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // goaws reads the form again from r.Form
		switch r.Form.Get("Action") {
		case "CreateQueue", "DeleteQueue", "SetQueueAttributes", "PurgeQueue":
			mu.Lock()
			defer mu.Unlock()
		default:
			mu.RLock()
			defer mu.RUnlock()
		}
		h.ServeHTTP(w, r)
	})
}

// Client returns an SDK client of endpoint (an Emulator's URL) that speaks
// the query protocol, sends no credentials and does not retry (a test
// sees each failure).
func Client(endpoint string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  aws.AnonymousCredentials{},
		Retryer:      aws.NopRetryer{},
	}, func(o *sqs.Options) { o.Protocol = awsquery.New(schemas.AmazonSQS) })
}

// ARN returns the ARN of the emulator's queue name (for a redrive policy).
func ARN(name string) string { return "arn:aws:sqs:" + Region + ":" + AccountID + ":" + name }
