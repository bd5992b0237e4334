package idem_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// Each call of Do is a span; fn's own spans are its children; the span
// tells the outcome, the namespace, whether the call waited, and the token.
func TestTracing(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(bg)
	rt := idemtest.Runtime(t, idem.Options{TracerProvider: tp})
	key := store.BuildKey("order-1", store.Scope{Namespace: "tenant-a"})
	_, err := idem.Do(bg, rt, key, func(ctx context.Context) (int, error) {
		_, child := tp.Tracer("test").Start(ctx, "charge")
		child.End()
		return 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { return 2, nil })
	_, _ = idem.Do(bg, rt, "failing", func(context.Context) (int, error) { return 0, errors.New("boom") })

	spans := rec.Ended()
	var do []sdktrace.ReadOnlySpan
	var child sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "idem.Do":
			do = append(do, s)
		case "charge":
			child = s
		}
	}
	if len(do) != 3 || child == nil {
		t.Fatalf("%d idem.Do spans and child %v", len(do), child)
	}
	first := do[0]
	if child.Parent().SpanID() != first.SpanContext().SpanID() {
		t.Fatal("fn's span is not a child of the idem.Do span")
	}
	want := map[string]string{"idem.namespace": "tenant-a", "idem.outcome": "executed", "idem.result": "ok"}
	for k, v := range want {
		if got, ok := attr(first.Attributes(), k); !ok || got.AsString() != v {
			t.Errorf("first span %s = %v, want %s", k, got.AsString(), v)
		}
	}
	if tok, ok := attr(first.Attributes(), "idem.token"); !ok || tok.AsInt64() <= 0 {
		t.Errorf("first span token: %v", tok)
	}
	if got, _ := attr(do[1].Attributes(), "idem.outcome"); got.AsString() != "replayed" {
		t.Errorf("second span outcome: %v", got.AsString())
	}
	if do[2].Status().Code != codes.Error || len(do[2].Events()) == 0 {
		t.Errorf("failing span: status %v, %d events", do[2].Status(), len(do[2].Events()))
	}
	_ = trace.SpanKindInternal
}

// An observer sees every call, off the shard goroutine, with no key unless
// asked.
func TestObserverEvents(t *testing.T) {
	var evs []idem.CallEvent
	obs := observerFunc(func(ev idem.CallEvent) { evs = append(evs, ev) })
	rt := idemtest.Runtime(t, idem.Options{Observer: obs})
	key := store.BuildKey("secret-customer-42", store.Scope{Namespace: "tenant-b"})
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { return 1, nil })
	_, _ = idem.Do(bg, rt, key, func(context.Context) (int, error) { return 1, nil })
	if len(evs) != 2 || evs[0].Outcome != idem.Executed || evs[1].Outcome != idem.Replayed ||
		evs[0].Namespace != "tenant-b" || evs[0].Key != "" || evs[0].Fence == 0 || evs[0].Run <= 0 {
		t.Fatalf("events: %+v", evs)
	}
	rt2 := idemtest.Runtime(t, idem.Options{Observer: obs, ObserveKeys: true})
	evs = nil
	_, _ = idem.Do(bg, rt2, key, func(context.Context) (int, error) { return 1, nil })
	if len(evs) != 1 || evs[0].Key != key {
		t.Fatalf("with ObserveKeys: %+v", evs)
	}
}

type observerFunc func(idem.CallEvent)

func (f observerFunc) OnCall(ev idem.CallEvent)          { f(ev) }
func (f observerFunc) OnStoreBatch(idem.StoreBatchEvent) {}
