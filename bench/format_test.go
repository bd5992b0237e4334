package main

import (
	"math"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, c := range []struct {
		name      string
		got, want string
	}{
		// Exact counts.
		{"count zero", count(0), "0"},
		{"count below a thousand", count(999), "999"},
		{"count a thousand", count(1000), "1,000"},
		{"count", count(1_480_000), "1,480,000"},
		{"count negative", count(-1234), "-1,234"},
		{"count huge", count(math.MaxInt64), "9,223,372,036,854,775,807"},
		{"count most negative", count(math.MinInt64), "-9,223,372,036,854,775,808"},
		{"plural one", plural(1, "system run", "system runs"), "1 system run"},
		{"plural many", plural(1200, "system run", "system runs"), "1,200 system runs"},

		// Plain numbers.
		{"decimal zero", decimal(0), "0"},
		{"decimal", decimal(3.25), "3.25"},
		{"decimal whole", decimal(3), "3"},
		{"decimal small", decimal(1.0 / 7), "0.143"},
		{"decimal tiny", decimal(-1e-9), "0"},
		{"decimal NaN", decimal(nan), noValue},
		{"decimal Inf", decimal(-inf), noValue},
		{"decimal huge", decimal(2.5e9), "2.5e+09"},

		// Abbreviated numbers and rates.
		{"si zero", si(0), "0"},
		{"si", si(12.5), "12.5"},
		{"si just below k", si(999.4), "999"},
		{"si rounds to k", si(999.6), "1k"},
		{"si G", si(2.5e9), "2.5G"},
		{"si M", si(1_480_000), "1.48M"},
		{"si negative", si(-2500), "-2.5k"},
		{"si T", si(3e12), "3T"},
		{"si huge", si(1e300), "1e+288T"},
		{"si NaN", si(nan), noValue},
		{"rate zero", rate(0), "0/s"},
		{"rate", rate(910_000), "910k/s"},
		{"rate Inf", rate(inf), noValue},

		// Durations.
		{"micros zero", micros(0), "0"},
		{"micros ns", micros(0.5), "500 ns"},
		{"micros µs", micros(12.34), "12.3 µs"},
		{"micros ms", micros(1500), "1.5 ms"},
		{"micros s", micros(2.5e6), "2.5 s"},
		{"micros rounds up a unit", micros(999.7), "1 ms"},
		{"micros huge", micros(1e300), "1e+294 s"},
		{"micros NaN", micros(nan), noValue},
		{"micros Inf", micros(-inf), noValue},
		{"duration zero", duration(0), "0"},
		{"duration ns", duration(1), "1 ns"},
		{"duration", duration(50 * time.Millisecond), "50 ms"},
		{"duration long", duration(90 * time.Second), "90 s"},
		{"duration huge", duration(math.MaxInt64), "9.22e+09 s"},
		{"settle none", settleMicros(Latency{}, 12), noValue},
		{"settle", settleMicros(Latency{Count: 1}, 12), "12 µs"},

		// Sizes.
		{"bytes zero", bytesPer(0), "0"},
		{"bytes", bytesPer(412), "412 B"},
		{"bytes KiB", bytesPer(1536), "1.5 KiB"},
		{"bytes MiB", bytesPer(3 << 20), "3 MiB"},
		{"bytes GiB", bytesPer(5 << 30), "5 GiB"},
		{"bytes TiB", bytesPer(2 << 40), "2 TiB"},
		{"bytes huge", bytesPer(1e300), "9.09e+287 TiB"},
		{"bytes NaN", bytesPer(nan), noValue},

		// Ratios and shares.
		{"ratio zero", ratio(0), "0×"},
		{"ratio", ratio(1.63), "1.63×"},
		{"ratio large", ratio(118.4), "118×"},
		{"ratio huge", ratio(1e12), "1e+12×"},
		{"ratio Inf", ratio(inf), noValue},
		{"percent zero", percent(0, 0.05), "0%"},
		{"percent", percent(0.25, 0.05), "25%"},
		{"percent fine step", percent(0.005, 0.001), "0.5%"},
		{"percent finer step", percent(0.0025, 0.0005), "0.25%"},
		{"percent NaN", percent(nan, 0.05), noValue},

		// Missing text.
		{"blank", orNoValue(" "), noValue},
		{"text", orNoValue("zipf"), "zipf"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}
