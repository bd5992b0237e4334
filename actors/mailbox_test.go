package actors

import "testing"

func TestMsgQueueIsFIFOAndReusesMemory(t *testing.T) {
	var q msgQueue
	next, want := 0, 0
	for round := range 50 {
		for range 100 + round {
			q.push(next)
			next++
		}
		for range 90 { // never drains: the front is moved down on push
			if got := q.pop(); got != want {
				t.Fatalf("pop = %v, want %d", got, want)
			}
			want++
		}
	}
	if cap(q.buf) > 4096 {
		t.Fatalf("queue of %d messages holds %d slots", len(q.buf)-q.head, cap(q.buf))
	}
	for q.pop() != nil {
	}
	if q.head != 0 || len(q.buf) != 0 {
		t.Fatal("a drained queue does not start over")
	}
}
