package main

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Number formatting for the numbers the harness reports: in the HTML
// report, the text tables, the console lines and the targets' measured
// strings (flag errors echo the flag as given). There is one function per
// quantity, so that a number reads the same wherever it appears:
//
//   - three significant digits, trailing zeros dropped: "1.5", "12.3", "118";
//   - a space before a unit ("12.3 µs", "1.5 KiB"), none before a suffix
//     that is part of the number ("1.48M", "1.48M/s", "1.63×", "25%");
//   - exact counts with thousands separators: "1,480,000";
//   - a zero duration or size as a bare "0", without a unit;
//   - noValue for a value that is missing, NaN or infinite.

// noValue stands in for a value that is missing or not a finite number.
const noValue = "—"

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// orNoValue returns s, or noValue when s is blank.
func orNoValue(s string) string {
	if strings.TrimSpace(s) == "" {
		return noValue
	}
	return s
}

// count prints an exact count with thousands separators: "1,480,000".
func count(v int64) string {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// plural prints k and the noun that agrees with it: "1 system run",
// "2 system runs".
func plural(k int, one, many string) string {
	if k == 1 {
		return "1 " + one
	}
	return count(int64(k)) + " " + many
}

// decimal prints a number that has no unit, such as allocations per call or
// the -dup share: "3.2", "0.143".
func decimal(v float64) string {
	if !finite(v) {
		return noValue
	}
	return sig(v)
}

// si prints a large number with a k, M, G or T suffix: "910k", "1.48M".
func si(v float64) string {
	if !finite(v) {
		return noValue
	}
	switch a := math.Abs(v); {
	case a >= 999.5e9:
		return sig(v/1e12) + "T"
	case a >= 999.5e6:
		return sig(v/1e9) + "G"
	case a >= 999.5e3:
		return sig(v/1e6) + "M"
	case a >= 999.5:
		return sig(v/1e3) + "k"
	default:
		return sig(v)
	}
}

// rate prints a throughput given in calls per second: "1.48M/s".
func rate(perSecond float64) string {
	if !finite(perSecond) {
		return noValue
	}
	return si(perSecond) + "/s"
}

// micros prints a duration given in microseconds, in ns, µs, ms or s:
// "500 ns", "12.3 µs", "1.5 ms", "2.5 s".
func micros(us float64) string {
	if !finite(us) {
		return noValue
	}
	switch a := math.Abs(us); {
	case a == 0:
		return "0"
	case a < 1:
		return sig(us*1e3) + " ns"
	case a < 999.5:
		return sig(us) + " µs"
	case a < 999.5e3:
		return sig(us/1e3) + " ms"
	default:
		return sig(us/1e6) + " s"
	}
}

// settleMicros prints v, a quantile of the settle latency s, as micros
// does, or noValue when no call waited for a run in flight.
func settleMicros(s Latency, v float64) string {
	if s.Count <= 0 {
		return noValue
	}
	return micros(v)
}

// duration prints d as micros does: "50 ms", "3 s".
func duration(d time.Duration) string {
	return micros(float64(d) / float64(time.Microsecond))
}

// bytesPer prints a size in bytes, in B, KiB, MiB, GiB or TiB: "412 B",
// "1.5 KiB".
func bytesPer(v float64) string {
	if !finite(v) {
		return noValue
	}
	const k = 1024.0
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a < k:
		return sig(v) + " B"
	case a < k*k:
		return sig(v/k) + " KiB"
	case a < k*k*k:
		return sig(v/(k*k)) + " MiB"
	case a < k*k*k*k:
		return sig(v/(k*k*k)) + " GiB"
	default:
		return sig(v/(k*k*k*k)) + " TiB"
	}
}

// ratio prints how many times one quantity is another: "1.63×".
func ratio(v float64) string {
	if !finite(v) {
		return noValue
	}
	return sig(v) + "×"
}

// percent prints a share (0.25 is "25%") with the decimals that a scale
// whose ticks are step apart needs: none for whole percents, one or two for
// finer steps.
func percent(share, step float64) string {
	if !finite(share) {
		return noValue
	}
	prec := 0
	if step*100 < 1 {
		prec = 1
	}
	if step*100 < 0.1 {
		prec = 2
	}
	return strconv.FormatFloat(share*100, 'f', prec, 64) + "%"
}

// sig prints v with three significant digits and no trailing zeros. Below
// a million it never uses e-notation; from there on, which only an absurd
// input reaches once the callers have picked a unit, it does: "1e+09".
func sig(v float64) string {
	var s string
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v, 'g', 3, 64)
	case a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 3, 64)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		return "0"
	}
	return s
}
