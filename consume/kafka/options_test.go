package kafka_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/idemtest"
)

// Options that are missing or contradict each other are errors matching
// idem.ErrInvalidArgument, with the package's prefix; nothing panics.
func TestNewRefusesBadOptions(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	cc, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *kafka.Record) error { return nil }
	good := kafka.Options{Consumer: cc, Group: "g", Topics: []string{"t"}, Handler: h}
	for name, mod := range map[string]func(*kafka.Options){
		"no consumer":       func(o *kafka.Options) { o.Consumer = nil },
		"zero consumer":     func(o *kafka.Options) { o.Consumer = &consume.Consumer{} },
		"no group":          func(o *kafka.Options) { o.Group = "" },
		"no topics":         func(o *kafka.Options) { o.Topics = nil },
		"empty topic":       func(o *kafka.Options) { o.Topics = []string{""} },
		"no handler":        func(o *kafka.Options) { o.Handler = nil },
		"negative attempts": func(o *kafka.Options) { o.InPlaceAttempts = -1 },
		"negative interval": func(o *kafka.Options) { o.CommitInterval = -1 },
		"huge interval":     func(o *kafka.Options) { o.CommitInterval = math.MaxInt64 },
		"attempts, nowhere": func(o *kafka.Options) { o.InPlaceAttempts = 2 },
		"dead letter topic": func(o *kafka.Options) { o.DeadLetterTopic = "t" },
		"retry = dead":      func(o *kafka.Options) { o.DeadLetterTopic, o.RetryTopic = "d", "d" },
		"retry = topic":     func(o *kafka.Options) { o.RetryTopic = "t" },
	} {
		o := good
		mod(&o)
		c, err := kafka.New(o, kgo.SeedBrokers("127.0.0.1:1"))
		if c != nil || !errors.Is(err, idem.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "kafka: ") {
			t.Errorf("%s: %v, %v; want an invalid-argument error starting with kafka:", name, c, err)
		}
	}
	var nilc *kafka.Consumer
	if err := nilc.Run(context.Background()); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Run on nil: %v", err)
	}
	nilc.Close()
	(&kafka.Consumer{}).Close()
}

// Run a second time, or after Close, is an error; Close is idempotent and
// ends Run.
func TestRunOnceAndClose(t *testing.T) {
	e := newEnv(t, 1)
	c, err := kafka.New(kafka.Options{Consumer: e.consumer(t, 0), Group: group, Topics: []string{topic},
		Handler: func(context.Context, *kafka.Record) error { return nil }}, kgo.SeedBrokers(e.kc.Addrs...), kgo.FetchMaxWait(100*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	e.produce(t, 0, "a", 1)
	e.allCommitted(t, 1)
	if err := c.Run(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "kafka: ") {
		t.Errorf("a second Run: %v", err)
	}
	c.Close()
	if err := idemtest.Recv(t, done); err != nil {
		t.Errorf("Run: %v", err)
	}
	c.Close()
	if err := c.Run(context.Background()); err == nil {
		t.Error("Run after Close: no error")
	}
}
