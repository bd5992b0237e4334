package memstore

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExpiryQueueBlocks checks the queue against a slice across many block
// boundaries: pushes, due pops, drops and filters keep the items in order.
func TestExpiryQueueBlocks(t *testing.T) {
	var q expiryQueue
	var model []tick
	rng := rand.New(rand.NewPCG(3, 4))
	next := tick(1)
	for step := range 50000 {
		switch op := rng.IntN(100); {
		case op < 55:
			for range rng.IntN(2 * queueBlock) {
				q.push(expiryItem{at: next})
				model = append(model, next)
				next++
			}
		case op < 80:
			// Everything up to a time is due.
			until := next - tick(rng.IntN(3*queueBlock))
			for {
				it, ok := q.popDue(until)
				if !ok {
					break
				}
				if len(model) == 0 || it.at != model[0] {
					t.Fatalf("step %d: popped %d; model head %v", step, it.at, model[:min(1, len(model))])
				}
				model = model[1:]
			}
			if len(model) > 0 && model[0] <= until {
				t.Fatalf("step %d: %d is due at %d but was not popped", step, model[0], until)
			}
		case op < 95:
			for range rng.IntN(queueBlock) {
				if q.len() == 0 {
					break
				}
				q.drop()
				model = model[1:]
			}
		default:
			m := tick(2 + rng.IntN(5))
			q.filter(func(it expiryItem) bool { return it.at%m != 0 })
			model = slices.DeleteFunc(model, func(at tick) bool { return at%m == 0 })
		}
		if q.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", step, q.len(), len(model))
		}
		if it, ok := q.front(); ok != (len(model) > 0) || ok && (it.at != model[0] || q.headAt != it.at) {
			t.Fatalf("step %d: front %d %v, headAt %d; model %d items", step, it.at, ok, q.headAt, len(model))
		}
		if want := (len(model) + q.head + queueBlock - 1) / queueBlock; len(q.blocks) > max(1, want) {
			t.Fatalf("step %d: %d blocks for %d items from %d", step, len(q.blocks), len(model), q.head)
		}
	}
	var got []tick
	for {
		it, ok := q.front()
		if !ok {
			break
		}
		got = append(got, it.at)
		q.drop()
	}
	if !slices.Equal(got, model) {
		t.Fatalf("drained %d items, model %d", len(got), len(model))
	}
}
