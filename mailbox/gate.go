package mailbox

import "sync/atomic"

// Gate bounds the requests pending in one shard. Callers Enter before they
// send a request and Leave when they have their answer; past the limit Enter
// refuses at once, instead of letting a mailbox grow without bound. The zero
// Gate refuses nothing; set a limit with [Gate.SetLimit].
type Gate struct {
	n     atomic.Int64
	limit int64
}

// SetLimit sets the most requests Enter admits at once (0: no limit). Call it
// before the Gate is shared.
func (g *Gate) SetLimit(n int) { g.limit = int64(n) }

// Enter admits one request, or reports false when the limit is reached.
func (g *Gate) Enter() bool {
	if n := g.n.Add(1); g.limit > 0 && n > g.limit {
		g.n.Add(-1)
		return false
	}
	return true
}

// Leave ends a request admitted by Enter.
func (g *Gate) Leave() { g.n.Add(-1) }

// Pending returns how many requests are admitted now.
func (g *Gate) Pending() int { return int(g.n.Load()) }
