package main

import "testing"

func TestKeyString(t *testing.T) {
	if got := keyString("bench:1:k", 4207); got != "bench:1:k4207" {
		t.Fatalf("keyString: %q", got)
	}
	for _, c := range []struct {
		s    string
		id   int64
		want bool
	}{{"rcpt-42", 42, true}, {"rcpt-42", 43, false}, {"rcpt-042", 42, false}, {"rcpt+42", 42, false}, {"rcpt-", 0, false}} {
		if got := isKeyString(c.s, "rcpt-", c.id); got != c.want {
			t.Errorf("isKeyString(%q, %d) = %v", c.s, c.id, got)
		}
	}
}

// The workload costs a run's calls two allocations: the key and the
// result's ID.
func TestWorkloadAllocs(t *testing.T) {
	if got := workloadAllocs("bench:1796298791866755737:memory:unique:idem:k"); got < 1.5 || got > 2.5 {
		t.Fatalf("%.2f allocs per call of the workload alone, want 2", got)
	}
}
