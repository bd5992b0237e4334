package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/idemrt/idem/store"
)

// listStates are the values of list's -state: expired-lease is a key in
// progress whose lease has ended without a result (its owner crashed or
// stalled; the next claim takes it over).
var listStates = []string{"all", "completed", "failed", "in-progress", "expired-lease"}

// listReport is a page of list, as JSON.
type listReport struct {
	Prefix string      `json:"prefix"`
	State  string      `json:"state"`
	Keys   []keyReport `json:"keys"`
	// NotIdem counts the keys of the page whose record the store cannot
	// read as idem's.
	NotIdem int `json:"not_idem"`
	// Next is the -after of the next page; "" after the last.
	Next string `json:"next,omitempty"`
}

// listCursor is where a page of list ends: the store's scan cursor of the
// scan page that held its last key, and that key (the page resumes after
// it, reading that scan page again).
type listCursor struct {
	Scan string
	Last string
}

// cursorJSON is a listCursor as -after holds it. The key goes as bytes (in
// base64): a JSON string would replace the bytes of a key that is not
// UTF-8, and the next page would never find it.
type cursorJSON struct {
	Scan string `json:"c"`
	Last []byte `json:"b"`
}

func (lc listCursor) String() string {
	b, _ := json.Marshal(cursorJSON{Scan: lc.Scan, Last: []byte(lc.Last)})
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseListCursor(s string) (listCursor, error) {
	var cj cursorJSON
	if s == "" {
		return listCursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &cj)
	}
	if err != nil || len(cj.Last) == 0 {
		return listCursor{}, usagef("-after %q is not a cursor printed by list", s)
	}
	return listCursor{Scan: cj.Scan, Last: string(cj.Last)}, nil
}

func badCursor(s string) bool {
	_, err := parseListCursor(s)
	return err != nil
}

// listState is a listed key's state: expired-lease for a key in progress
// whose lease ended, else as stateName.
func listState(e store.Entry) string {
	if e.State == store.Held && e.LeaseLeft == 0 {
		return "expired-lease"
	}
	return stateName(e)
}

// lists reports whether list shows a key it found: an idem record, not
// absent, of the -state asked for.
func (cfg *config) lists(f found) bool {
	return f.corrupt == nil && f.entry.State != store.Absent && (cfg.state == "all" || cfg.state == listState(f.entry))
}

// errPageFull stops a walk once a page of list is full.
var errPageFull = errors.New("page full")

// cmdList lists the keys of the scope whose state passes -state, -limit
// at a time: each with its state, owner and lease (in progress), or time
// left and size or error (completed and failed). The page ends with the
// -after of the next one.
func cmdList(ctx context.Context, c *conn, cfg *config, out *printer) error {
	lc, err := parseListCursor(cfg.after)
	if err != nil {
		return err
	}
	rep := listReport{Prefix: cfg.scopePrefix(), State: cfg.state, Keys: []keyReport{}}
	now := time.Now()
	cursor, skipping := lc.Scan, lc.Last != ""
	for {
		keys, next, err := c.store.Scan(ctx, rep.Prefix, cursor, cfg.page)
		if skipping && errors.Is(err, store.ErrInvalidArgument) {
			// -after decoded, but its scan cursor is not this store's.
			return usagef("-after %q is not a cursor printed by list on this store", cfg.after)
		}
		if err != nil {
			return c.failed(err)
		}
		if skipping {
			// Resume after the last key listed; a scan page that no longer
			// holds it (deleted meanwhile) is listed whole.
			for i, k := range keys {
				if k == lc.Last {
					keys = keys[i+1:]
					break
				}
			}
			skipping = false
		}
		res, err := c.inspectAll(ctx, keys)
		if err != nil {
			return err
		}
		full := false
		for i, f := range res {
			if f.corrupt != nil {
				rep.NotIdem++
				continue
			}
			if !cfg.lists(f) {
				continue
			}
			r := newKeyReport(f.key, c.recordName(f.key), f.entry, now)
			r.State = listState(f.entry)
			rep.Keys = append(rep.Keys, r)
			if len(rep.Keys) == cfg.limit {
				full = true
				// A next page only when keys are left: in this scan page
				// (read already) one that would be listed, or more pages.
				if next != "" || slices.ContainsFunc(res[i+1:], cfg.lists) {
					rep.Next = listCursor{Scan: cursor, Last: f.key}.String()
				} else {
					// No page will count the rest of this one.
					for _, g := range res[i+1:] {
						if g.corrupt != nil {
							rep.NotIdem++
						}
					}
				}
				break
			}
		}
		if full || next == "" {
			break
		}
		cursor = next
	}
	if out.json {
		out.encode(rep)
		return nil
	}
	for _, r := range rep.Keys {
		out.printf("%-13s %s%s\n", r.State, shown(r.Key), listDetail(r))
	}
	if len(rep.Keys) == 0 {
		out.notef("no keys of state %s in %s", rep.State, scopeText(rep.Prefix))
	}
	if rep.NotIdem > 0 {
		out.notef("%d keys listed are not idem records (see stats)", rep.NotIdem)
	}
	if rep.Next != "" {
		out.notef("more: pass -after %s for the next page", rep.Next)
	}
	return nil
}

// listDetail is the rest of a human list line.
func listDetail(r keyReport) string {
	if r.Consumer != nil {
		return "  (" + shown(consumerText(r.Consumer)) + ")" + listDetail(keyReport{State: r.State, Owner: r.Owner,
			LeaseLeftMs: r.LeaseLeftMs, LeaseEndsAt: r.LeaseEndsAt, TTLLeftMs: r.TTLLeftMs, ValueBytes: r.ValueBytes, Error: r.Error})
	}
	switch {
	case r.LeaseLeftMs != nil && *r.LeaseLeftMs == 0:
		return fmt.Sprintf("  owner %s, lease ended", shown(r.Owner))
	case r.LeaseLeftMs != nil:
		return fmt.Sprintf("  owner %s, lease left %v", shown(r.Owner), time.Duration(*r.LeaseLeftMs)*time.Millisecond)
	case r.State == "failed":
		return fmt.Sprintf("  expires in %v, error: %s", roundDuration(time.Duration(*r.TTLLeftMs)*time.Millisecond), shown(r.Error))
	case r.ValueBytes != nil:
		return fmt.Sprintf("  expires in %v, %s", roundDuration(time.Duration(*r.TTLLeftMs)*time.Millisecond), bytesText(*r.ValueBytes))
	}
	return ""
}

// scopeText names the keys a prefix covers, in a note.
func scopeText(prefix string) string {
	if prefix == "" {
		return "the store"
	}
	return fmt.Sprintf("keys starting with %q", prefix)
}
