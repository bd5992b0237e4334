package fence

import (
	"testing"
	"time"
)

func TestFloor(t *testing.T) {
	if got := time.Unix(EpochUnix, 0).UTC(); !got.Equal(Epoch) {
		t.Fatalf("EpochUnix is %v, Epoch %v", got, Epoch)
	}
	for _, c := range []struct {
		t    time.Time
		want uint64
	}{
		{time.Unix(0, 0), 1},
		{Epoch, 1},
		{Epoch.Add(time.Microsecond), 1},
		{Epoch.Add(2*time.Microsecond + 999*time.Nanosecond), 2},
		{Epoch.Add(time.Second), 1_000_000},
		{time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), 60_566_400_000_000},
		{time.Date(2310, 1, 1, 0, 0, 0, 0, time.UTC), 8_993_635_200_000_000},
		{time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC), Max},
	} {
		if got := Floor(c.t); got != c.want {
			t.Errorf("Floor(%v) = %d, want %d", c.t, got, c.want)
		}
	}
}
