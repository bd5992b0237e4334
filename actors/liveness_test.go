package actors

import "testing"

func TestInstanceOf(t *testing.T) {
	for _, c := range []struct {
		owner, id string
		ok        bool
	}{
		{"0123456789abcdef-1", "0123456789abcdef", true},
		{"0123456789abcdef-zz9", "0123456789abcdef", true},
		{"0123456789abcdef-", "", false},
		{"0123456789ABCDEF-1", "", false},
		{"0123456789abcde-1", "", false},
		{"owner-1", "", false},
		{"", "", false},
	} {
		if id, ok := instanceOf(c.owner); id != c.id || ok != c.ok {
			t.Errorf("instanceOf(%q) = %q, %v; want %q, %v", c.owner, id, ok, c.id, c.ok)
		}
	}
}
