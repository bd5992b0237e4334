package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/idemrt/idem/store"
)

// statsReport describes the records of a scope, as JSON.
type statsReport struct {
	Prefix string `json:"prefix"`
	// Keys counts the keys listed; the rest count them by state.
	Keys       int `json:"keys"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	InProgress int `json:"in_progress"`
	// LeaseEnded counts the keys in progress whose lease has ended (their
	// owner is likely gone; the next claim takes them over).
	LeaseEnded int `json:"lease_ended"`
	Absent     int `json:"absent"`
	NotIdem    int `json:"not_idem"`
	// ValueBytes describes the values of completed records; nil without
	// any.
	ValueBytes *sizeStats `json:"value_bytes"`
	// TTLLeft counts completed and failed records by the time they have
	// left.
	TTLLeft []ttlBucket `json:"ttl_left"`
}

type sizeStats struct {
	Min    int   `json:"min"`
	Median int   `json:"median"`
	Max    int   `json:"max"`
	Total  int64 `json:"total"`
}

type ttlBucket struct {
	// Below is the bucket's upper bound in milliseconds, 0 for the last.
	Below int64  `json:"below_ms"`
	Label string `json:"label"`
	Count int    `json:"count"`
}

// ttlBounds are the upper bounds of the TTL-left buckets; a last bucket
// holds the rest.
var ttlBounds = []struct {
	d     time.Duration
	label string
}{
	{time.Minute, "< 1m"},
	{time.Hour, "1m - 1h"},
	{24 * time.Hour, "1h - 1d"},
	{7 * 24 * time.Hour, "1d - 7d"},
}

// cmdStats counts the records of the scope by state, and describes their
// value sizes and the time they have left.
func cmdStats(ctx context.Context, c *conn, cfg *config, out *printer) error {
	rep := statsReport{Prefix: cfg.scopePrefix()}
	for _, b := range ttlBounds {
		rep.TTLLeft = append(rep.TTLLeft, ttlBucket{Below: b.d.Milliseconds(), Label: b.label})
	}
	rep.TTLLeft = append(rep.TTLLeft, ttlBucket{Label: ">= 7d"})
	var sizes []int
	err := c.walk(ctx, rep.Prefix, cfg.page, func(f found) error {
		rep.Keys++
		e := f.entry
		switch {
		case f.corrupt != nil:
			rep.NotIdem++
		case e.State == store.Absent:
			rep.Absent++
		case e.State == store.Held:
			rep.InProgress++
			if e.LeaseLeft == 0 {
				rep.LeaseEnded++
			}
		default:
			if e.Record.Failed {
				rep.Failed++
			} else {
				rep.Completed++
				sizes = append(sizes, len(e.Record.Value))
			}
			left := time.Until(e.Record.ExpiresAt)
			i := slices.IndexFunc(ttlBounds, func(b struct {
				d     time.Duration
				label string
			}) bool {
				return left < b.d
			})
			if i < 0 {
				i = len(ttlBounds)
			}
			rep.TTLLeft[i].Count++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(sizes) > 0 {
		slices.Sort(sizes)
		s := &sizeStats{Min: sizes[0], Median: sizes[len(sizes)/2], Max: sizes[len(sizes)-1]}
		for _, n := range sizes {
			s.Total += int64(n)
		}
		rep.ValueBytes = s
	}
	if out.json {
		out.encode(rep)
		return nil
	}
	printStats(out, rep)
	return nil
}

func printStats(out *printer, rep statsReport) {
	scope := fmt.Sprintf("%q", rep.Prefix)
	if rep.Prefix == "" {
		scope = "every key of the store prefix"
	}
	out.field("scope", "%s", scope)
	out.field("keys", "%d", rep.Keys)
	out.field("completed", "%d", rep.Completed)
	out.field("failed", "%d", rep.Failed)
	out.field("in progress", "%d (lease ended: %d)", rep.InProgress, rep.LeaseEnded)
	if rep.Absent > 0 {
		out.field("absent", "%d (released, or gone during the scan)", rep.Absent)
	}
	if rep.NotIdem > 0 {
		out.field("not idem's", "%d", rep.NotIdem)
	}
	if v := rep.ValueBytes; v != nil {
		out.field("values", "min %s, median %s, max %s, total %s",
			bytesText(v.Min), bytesText(v.Median), bytesText(v.Max), bytesText(int(v.Total)))
	}
	out.printf("TTL left (completed and failed):\n")
	for _, b := range rep.TTLLeft {
		out.printf("  %-10s %d\n", b.Label, b.Count)
	}
}
