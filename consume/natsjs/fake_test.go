package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fakeMsg is a jetstream.Msg that records how it was answered, for the
// tests that need no server.
type fakeMsg struct {
	md       *jetstream.MsgMetadata
	mdErr    error
	data     []byte
	header   nats.Header
	onAnswer func(string) // called with each answer, before it is recorded

	mu      sync.Mutex
	answers []string
}

var _ jetstream.Msg = (*fakeMsg)(nil)

func newFake(id string, delivered uint64) *fakeMsg {
	h := nats.Header{}
	if id != "" {
		h.Set(jetstream.MsgIDHeader, id)
	}
	return &fakeMsg{
		md: &jetstream.MsgMetadata{Stream: "S", Consumer: "c", NumDelivered: delivered,
			Sequence: jetstream.SequencePair{Stream: 7, Consumer: 9}, Timestamp: time.Unix(1, 0)},
		data: []byte("payload"), header: h,
	}
}

func (m *fakeMsg) answer(s string) error {
	if m.onAnswer != nil {
		m.onAnswer(s)
	}
	m.mu.Lock()
	m.answers = append(m.answers, s)
	m.mu.Unlock()
	return nil
}

// Answers returns the answers so far.
func (m *fakeMsg) Answers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.answers...)
}

func (m *fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	if m.mdErr != nil {
		return nil, m.mdErr
	}
	return m.md, nil
}
func (m *fakeMsg) Data() []byte                       { return m.data }
func (m *fakeMsg) Headers() nats.Header               { return m.header }
func (m *fakeMsg) Subject() string                    { return "s.x" }
func (m *fakeMsg) Reply() string                      { return "$JS.ACK.fake" }
func (m *fakeMsg) Ack() error                         { return m.answer("ack") }
func (m *fakeMsg) DoubleAck(context.Context) error    { return m.answer("doubleack") }
func (m *fakeMsg) Nak() error                         { return m.answer("nak") }
func (m *fakeMsg) NakWithDelay(d time.Duration) error { return m.answer(fmt.Sprint("nak ", d)) }
func (m *fakeMsg) InProgress() error                  { return m.answer("progress") }
func (m *fakeMsg) Term() error                        { return m.answer("term") }
func (m *fakeMsg) TermWithReason(r string) error      { return m.answer("term " + r) }

var errNotJS = errors.New("not a JetStream message")
