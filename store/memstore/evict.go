package memstore

// addAbandoned remembers a claim in progress that outlived its lease and
// TTL. The list is pruned of claims since completed, released or taken over
// each time its length doubles, so it stays within twice the live ones.
func (sh *shard) addAbandoned(it expiryItem) {
	if it.rec.listed {
		return // still listed from an earlier time it was abandoned
	}
	if n := len(sh.abandoned); n >= 64 && n&(n-1) == 0 {
		kept := sh.abandoned[:0]
		for _, a := range sh.abandoned {
			if sh.isAbandoned(a) {
				kept = append(kept, a)
			} else {
				a.rec.listed = false
			}
		}
		clear(sh.abandoned[len(kept):])
		sh.abandoned = kept
	}
	it.rec.listed = true
	sh.abandoned = append(sh.abandoned, it)
}

// isAbandoned reports whether it still names a claim in progress past its
// removal time that nothing has touched since.
func (sh *shard) isAbandoned(it expiryItem) bool {
	r := sh.records[it.key]
	return r == it.rec && r.state == inProgress && r.removeAt == 0
}

// evictAbandoned removes the oldest claim in progress that outlived its
// lease and TTL with nobody taking it over (its owner is most likely gone;
// if not, its Complete is refused as a takeover's would be), and reports
// whether there was one.
func (sh *shard) evictAbandoned() bool {
	for len(sh.abandoned) > 0 {
		it := sh.abandoned[0]
		sh.abandoned[0] = expiryItem{}
		sh.abandoned = sh.abandoned[1:]
		it.rec.listed = false
		if sh.isAbandoned(it) {
			sh.remove(it.key, it.rec)
			return true
		}
	}
	return false
}

// hasResult reports whether the shard holds a completed record: a full
// shard of live claims only takes one more (its claims end by themselves),
// as it always has.
func (sh *shard) hasResult() bool {
	for _, r := range sh.records {
		if r.state == completed {
			return true
		}
	}
	return false
}

// evictResult removes the completed record whose removal is nearest among
// the queue heads, and reports whether there was one. Heads in progress
// are moved to the back of their queue, at most a few per call.
func (sh *shard) evictResult() bool {
	var best *expiryQueue
	var bestAt tick
	for _, q := range sh.expiry {
		for rotated := 0; rotated < 16; {
			it, ok := q.front()
			if !ok {
				break
			}
			if sh.records[it.key] != it.rec {
				q.drop() // stale: the record is gone or replaced
				continue
			}
			if it.rec.state != completed {
				q.drop()
				q.push(it)
				rotated++
				continue
			}
			if best == nil || it.at < bestAt {
				best, bestAt = q, it.at
			}
			break
		}
	}
	if best == nil {
		return false
	}
	it, _ := best.front()
	best.drop()
	sh.remove(it.key, it.rec)
	return true
}
