package redisstore

import "github.com/redis/go-redis/v9"

// The scripts share these conventions.
//
// A record is one hash, KEYS[1] = <prefix>v2{<name>} (see names.go), with the
// fields
//
//	st   state: p (in progress), c (completed), f (permanent error), r (released)
//	own  owner of the claim that holds or produced the record
//	fen  fence: increases with every claim while the record exists
//	lu   lease end, milliseconds by the Redis server clock (p only)
//	fp   fingerprint (of the holder while p, of the request that produced c/f)
//	res  encoded value (c) or error message (f)
//	ca   completion time, milliseconds by the Redis server clock (c/f)
//
// and KEYS[2] = <prefix>v2{<name>}:w is the set of waiters from other
// instances, as "<instance>:<key>". A record in progress lives at least
// max(lease, ttl), so its fence keeps increasing across takeovers; a
// completed one lives ttl. Times come from TIME, never from a client. Every
// write is fenced by owner and fence. A script answers for the state it
// finds, so running one twice is harmless only if nothing runs in between
// that changes its answer: go-redis never re-sends a call whose reply was
// lost (Store.exec marks every call NoRetry), and the store repeats only
// calls whose repeat cannot be answered wrongly (Store.repeat): a claim
// recognises its own owner and answers with the same token, a renew
// renews the holder's own lease again, a get writes nothing. The finish
// script recognises its own completion, so the runtime repeats a Complete;
// a repeated release or forget may answer for another client's call made
// in between, so the store does not repeat them.
//
// Replies are arrays whose first element is a code; -1 means the record is
// corrupt and the second element says why. Every script reads the record
// through record() (luaRecord), which finds it corrupt when the Redis key
// is not a hash (another application's string at the record's name, say)
// or is a hash without a known state: the script then answers -1, before
// any write, never with Redis's WRONGTYPE error, which would read as an
// outage, and never as the nearest state. A waiter set of another type is
// corrupt the same way, before the claim or finish that would use it
// writes anything.

const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// luaRecord defines record(field, ...): HMGET of KEYS[1]'s fields, the
// first of which must be st, or nil and the reason the key is no record
// the store can read. An absent key is all false (st too).
const luaRecord = `
local function record(...)
  local r = redis.pcall('HMGET', KEYS[1], ...)
  if r.err then return nil, 'not a hash: ' .. redis.call('TYPE', KEYS[1]).ok end
  local st = r[1]
  if not st then
    if redis.call('EXISTS', KEYS[1]) == 1 then return nil, 'field st missing' end
  elseif st ~= 'p' and st ~= 'c' and st ~= 'f' and st ~= 'r' then
    return nil, 'field st has an unknown state'
  end
  return r
end
local function notSet()
  return 'its waiter set (' .. KEYS[2] .. ') is not a set: ' .. redis.call('TYPE', KEYS[2]).ok
end
`

// claimScript: ARGV = owner, lease ms, ttl ms, fingerprint, waiter member.
// Replies:
//
//	{1, fence, lease left ms, takeover}                        claimed
//	{2, st, res, fp, fence, owner, ca, pttl, now}              completed
//	{3, lease left ms, fence, holder fp}                       in progress
const claimSrc = luaNow + luaRecord + `
local r, bad = record('st', 'own', 'fen', 'lu', 'fp', 'res', 'ca')
if not r then return {-1, bad} end
local st = r[1]
local lease = tonumber(ARGV[2])
local keep = math.max(tonumber(ARGV[3]), lease)
if not st then
  redis.call('HSET', KEYS[1], 'st', 'p', 'own', ARGV[1], 'fen', 1, 'lu', now + lease, 'fp', ARGV[4])
  redis.call('PEXPIRE', KEYS[1], keep)
  return {1, 1, lease, 0}
end
local fen = tonumber(r[3])
if not fen then return {-1, 'field fen missing or not a number'} end
if st == 'c' or st == 'f' then
  local ca = tonumber(r[7])
  if not ca then return {-1, 'field ca missing or not a number'} end
  if not r[6] then return {-1, 'field res missing'} end
  return {2, st, r[6], r[5] or '', fen, r[2] or '', ca, redis.call('PTTL', KEYS[1]), now}
end
local takeover = 0
if st == 'p' then
  local lu = tonumber(r[4])
  if not lu then return {-1, 'field lu missing or not a number'} end
  if r[2] == ARGV[1] then return {1, fen, lu - now, 0} end
  if lu > now then
    if ARGV[5] ~= '' then
      local added = redis.pcall('SADD', KEYS[2], ARGV[5])
      if type(added) == 'table' and added.err then return {-1, notSet()} end
      redis.call('PEXPIRE', KEYS[2], lu - now + 60000)
    end
    return {3, lu - now, fen, r[5] or ''}
  end
  takeover = 1
end
fen = fen + 1
redis.call('HSET', KEYS[1], 'st', 'p', 'own', ARGV[1], 'fen', fen, 'lu', now + lease, 'fp', ARGV[4])
redis.call('HDEL', KEYS[1], 'res', 'ca')
if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
return {1, fen, lease, takeover}
`

var claimScript = redis.NewScript(claimSrc)

// finishScript completes (c, f) or releases (r) a claim and wakes the
// waiters of other instances. ARGV = owner, fence, new state, res, fp,
// ttl ms, inbox channel prefix. Replies:
//
//	{1, ca, ttl}                                   done
//	{2, st, res, fp, ca, pttl, now}                our own completion, replayed
//	{0}                                            not the holder: lease lost
const finishSrc = luaNow + luaRecord + `
local r, bad = record('st', 'own', 'fen', 'res', 'fp', 'ca')
if not r then return {-1, bad} end
local st = r[1]
if st == 'p' and r[2] == ARGV[1] and r[3] == ARGV[2] then
  local ws = redis.pcall('SMEMBERS', KEYS[2])
  if ws.err then return {-1, notSet()} end
  if ARGV[3] == 'r' then
    redis.call('HSET', KEYS[1], 'st', 'r')
    redis.call('HDEL', KEYS[1], 'own', 'lu', 'fp')
  else
    redis.call('HSET', KEYS[1], 'st', ARGV[3], 'res', ARGV[4], 'fp', ARGV[5], 'ca', now)
    redis.call('HDEL', KEYS[1], 'lu')
    redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[6]))
  end
  for _, w in ipairs(ws) do
    local i = string.find(w, ':', 1, true)
    if i then redis.call('PUBLISH', ARGV[7] .. string.sub(w, 1, i - 1), string.sub(w, i + 1)) end
  end
  if #ws > 0 then redis.call('DEL', KEYS[2]) end
  return {1, now, tonumber(ARGV[6])}
end
if ARGV[3] == 'r' then
  if not st or st == 'r' then return {1, now, 0} end
  return {0}
end
if (st == 'c' or st == 'f') and r[2] == ARGV[1] and r[3] == ARGV[2] then
  local ca = tonumber(r[6])
  if not ca or not r[4] then return {-1, 'fields ca or res missing'} end
  return {2, st, r[4], r[5] or '', ca, redis.call('PTTL', KEYS[1]), now}
end
return {0}
`

var finishScript = redis.NewScript(finishSrc)

// renewScript renews a lease. ARGV = owner, fence, lease ms. Replies {1}
// or {0} (lease lost).
const renewSrc = luaNow + luaRecord + `
local r, bad = record('st', 'own', 'fen')
if not r then return {-1, bad} end
if r[1] == 'p' and r[2] == ARGV[1] and r[3] == ARGV[2] then
  local lease = tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'lu', now + lease)
  if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
  return {1}
end
return {0}
`

var renewScript = redis.NewScript(renewSrc)

// getScript reads a completed record. Replies {2, st, res, fp, fence, owner,
// ca, pttl, now} or {0} (none).
const getSrc = luaNow + luaRecord + `
local r, bad = record('st', 'own', 'fen', 'res', 'fp', 'ca')
if not r then return {-1, bad} end
local st = r[1]
if st ~= 'c' and st ~= 'f' then return {0} end
local fen, ca = tonumber(r[3]), tonumber(r[6])
if not fen or not ca or not r[4] then return {-1, 'fields fen, ca or res missing'} end
return {2, st, r[4], r[5] or '', fen, r[2] or '', ca, redis.call('PTTL', KEYS[1]), now}
`

var getScript = redis.NewScript(getSrc)

// forgetScript deletes a completed record. Replies {1} deleted, {0}
// nothing to delete (absent, or released: a released record lives on, so
// that its fence keeps rising, and is left), {3} in progress.
const forgetSrc = luaRecord + `
local r, bad = record('st')
if not r then return {-1, bad} end
local st = r[1]
if st == 'p' then return {3} end
if st == 'c' or st == 'f' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {1}
end
return {0}
`

var forgetScript = redis.NewScript(forgetSrc)

// inspectScript reads a record in any state, writing nothing. Replies
//
//	{0}                                            absent or released
//	{1, fence, owner, lease left ms, fp}           in progress (lease left ≥ 0)
//	{2, st, res, fp, fence, owner, ca, pttl, now}  completed
//
// A key that is not a hash is corrupt, as is a hash without a known state.
const inspectSrc = luaNow + luaRecord + `
local r, bad = record('st', 'own', 'fen', 'lu', 'fp', 'res', 'ca')
if not r then return {-1, bad} end
local st = r[1]
if not st or st == 'r' then return {0} end
local fen = tonumber(r[3])
if not fen then return {-1, 'field fen missing or not a number'} end
if st == 'p' then
  local lu = tonumber(r[4])
  if not lu or not r[2] then return {-1, 'fields lu or own missing'} end
  return {1, fen, r[2], math.max(lu - now, 0), r[5] or ''}
end
local ca = tonumber(r[7])
if not ca or not r[6] then return {-1, 'fields ca or res missing'} end
return {2, st, r[6], r[5] or '', fen, r[2] or '', ca, redis.call('PTTL', KEYS[1]), now}
`

var inspectScript = redis.NewScript(inspectSrc)

var allScripts = []*redis.Script{claimScript, finishScript, renewScript, getScript, forgetScript, inspectScript}

// ScriptSource returns the Lua source of one of the store's scripts:
// "claim", "finish", "renew", "get", "forget" or "inspect" ("" for another
// name).
// Tools that drive the scripts themselves (the benchmark harness runs
// redis-benchmark on the claim script) use it.
func ScriptSource(name string) string {
	switch name {
	case "claim":
		return claimSrc
	case "finish":
		return finishSrc
	case "renew":
		return renewSrc
	case "get":
		return getSrc
	case "forget":
		return forgetSrc
	case "inspect":
		return inspectSrc
	}
	return ""
}
