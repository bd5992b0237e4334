package main

import (
	"fmt"
	"strings"
)

// describe tells what a step's process did, from its events, in order:
// "committed t-01 t-02; SIGKILL in t-03 before its COMMIT".
func describe(p *proc) string {
	var out []phrase
	claims := map[string][]string{} // transfer → the words of its last "run" or "apply"
	for _, l := range p.lines() {
		w := strings.Fields(l)
		if len(w) < 2 {
			continue
		}
		if w[0] == "at" && len(w) == 3 { // at <point> <transfer>
			out = merge(out, phrase{form: "then SIGKILL " + killText(w[1]), alone: true, transfers: w[2:]})
			continue
		}
		t := w[1]
		var ph phrase
		switch {
		case w[0] == "run" || w[0] == "apply":
			claims[t] = w
			continue
		case w[0] == "transfer" && len(w) > 2 && w[2] == "executed":
			ph = phrase{form: "committed %s", note: takeover(claims[t])}
		case w[0] == "transfer" && len(w) > 2 && w[2] == "replayed":
			ph = phrase{form: "replayed %s"}
		case w[0] == "publish" && field(w, "duplicate") == "true":
			ph = phrase{form: "published %s again, and JetStream dropped the copy (a duplicate of seq " + field(w, "seq") + ")", alone: true}
		case w[0] == "publish":
			ph = phrase{form: "published %s"}
		case w[0] == "verdict" && len(w) > 3 && w[2] == "ack" && w[3] == "executed":
			ph = phrase{form: "applied %s", note: takeover(claims[t])}
		case w[0] == "verdict" && len(w) > 3 && w[2] == "ack" && w[3] == "replayed":
			ph = phrase{form: "replayed %s (delivery " + field(w, "delivery") + ": redelivered, not applied again)", alone: true}
		case w[0] == "verdict" && len(w) > 3 && w[2] == "retry" && w[3] == "none":
			ph = phrase{form: "gave %s back for later (its key still held by the killed run)"}
		case w[0] == "verdict":
			ph = phrase{form: "answered %s: " + strings.Join(w[2:], " "), alone: true}
		default:
			continue
		}
		ph.transfers = append(ph.transfers, t)
		out = merge(out, ph)
	}
	if len(out) == 0 {
		return "nothing to do"
	}
	s := make([]string, len(out))
	for i, ph := range out {
		s[i] = ph.String()
	}
	return strings.Join(s, "; ")
}

// phrase is one thing a process did, to one or more transfers.
type phrase struct {
	form      string // with a %s for the transfers
	note      string
	alone     bool // never merged with the next
	transfers []string
}

func (ph phrase) String() string {
	return fmt.Sprintf(ph.form, strings.Join(ph.transfers, " ")) + ph.note
}

// merge appends ph to out, or adds its transfer to the last phrase when
// they say the same.
func merge(out []phrase, ph phrase) []phrase {
	if n := len(out); n > 0 {
		last := &out[n-1]
		if !last.alone && !ph.alone && last.form == ph.form && last.note == "" && ph.note == "" {
			last.transfers = append(last.transfers, ph.transfers...)
			return out
		}
	}
	return append(out, ph)
}

// takeover notes a run that took its key over from a killed run.
func takeover(claim []string) string {
	if field(claim, "takeover") != "true" {
		return ""
	}
	return " (run again: it took the key over once the killed run's lease had ended)"
}

// killText says where a crash point is.
func killText(point string) string {
	switch point {
	case "before-commit":
		return "inside %s, its rows written, before its COMMIT"
	case "after-commit":
		return "right after %s's COMMIT, before the client heard of it"
	case "mid-relay":
		return "after publishing %s, before marking it sent"
	case "consumer-before-commit":
		return "inside %s's handler, its rows written, before its COMMIT"
	case "consumer-after-commit":
		return "after %s's COMMIT, before its acknowledgement"
	}
	return point + " %s"
}
