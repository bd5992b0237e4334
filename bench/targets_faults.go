package main

import (
	"fmt"
	"strings"
)

// A target compares figures of runs that did what they had to: a run with
// errors or wrong results measured something else (an error returns
// sooner than a result), and a run that ran a key twice broke the promise
// the figures are for. Such a target is not met, whatever its ratio, and
// says why.

// firstErrorLen bounds the first error quoted in a target's Measured.
const firstErrorLen = 120

// faultOf says what makes r unfit for a target: its errors (with the first
// one), its wrong results and its keys run more than once, or "" when it
// has none. An unsafe baseline's keys run twice are its nature, not a
// fault: its errors and wrong results are.
func faultOf(r *Result) string {
	var parts []string
	if r.Errors > 0 {
		first := r.FirstError
		if len(first) > firstErrorLen {
			first = first[:firstErrorLen] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s errors: %s", count(r.Errors), first))
	}
	if r.WrongResults > 0 {
		parts = append(parts, fmt.Sprintf("%s wrong results", count(r.WrongResults)))
	}
	if r.RanTwiceCount > 0 && !r.Unsafe {
		parts = append(parts, fmt.Sprintf("%s keys ran more than once", count(r.RanTwiceCount)))
	}
	if len(parts) == 0 {
		return ""
	}
	return r.System + ": " + strings.Join(parts, ", ")
}

// requireClean turns t, checked on runs rs, into not met when one of rs has
// a fault, naming the faults first in its Measured.
func requireClean(t *Target, rs ...*Result) {
	var faults []string
	for _, r := range rs {
		if f := faultOf(r); f != "" {
			faults = append(faults, f)
		}
	}
	if len(faults) == 0 {
		return
	}
	t.Met = false
	t.Measured = "runs unfit: " + strings.Join(faults, "; ") + " — " + t.Measured
}
