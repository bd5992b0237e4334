package redistest

import "testing"

// TestClusterSlot checks Slot against slots Redis Cluster gives (CLUSTER KEYSLOT),
// hash tags included.
func TestClusterSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":      12739, // CRC16/XMODEM's check value 0x31C3
		"foo":            12182,
		"{user1000}.a":   Slot("user1000"),
		"{user1000}.b":   Slot("{user1000}.a"),
		"x{tag}y{other}": Slot("tag"),
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}
