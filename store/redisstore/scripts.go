package redisstore

import "github.com/redis/go-redis/v9"

// The scripts share these conventions.
//
// A record is one string, KEYS[1] = <prefix>v3{<name>} (see names.go),
// whose value packed.go describes (layout 3, or 4 for a claim written by
// this version); KEYS[2] = <prefix>v3{<name>}:w is the
// set of waiters from other instances, as "<instance>:<key>", read only
// when the record's waiter flag says it may hold some. A record in
// progress lives until its lease ends and then at least ttl more (a claim
// keeps it lease + ttl, a renewal keeps that margin), so a takeover always
// finds it and its fence keeps increasing; a released one keeps what was
// left of that; a completed one lives ttl. The record's expiry, set with
// PX by the server, carries the lease (it ends when PTTL falls to the
// record's ms) and the completion time; the one script that calls TIME is
// the claim, for the fence floor of a claim that starts or takes over a
// record (see luaFloor). Every write is fenced by owner and fence.
//
// The scripts write with PSETEX (a new value and expiry) and SETRANGE (a
// state or flag byte in place, keeping the expiry), never SET, so INFO
// commandstats counts the store's operations as EVALSHA calls.
//
// A script answers for the state it finds, so running one twice is
// harmless only if nothing runs in between that changes its answer:
// go-redis never re-sends a call whose reply was lost (Store.exec marks
// every call NoRetry), and the store repeats only calls whose repeat
// cannot be answered wrongly (Store.repeat): a claim recognises its own
// owner and answers with the same token, a renew renews the holder's own
// lease again, a get writes nothing. The finish script recognises its own
// completion (owner and fence are kept in the completed value), so the
// runtime repeats a Complete; a repeated release or forget may answer for
// another client's call made in between, so the store does not repeat
// them.
//
// Replies are arrays whose first element is a code; -1 means the record is
// corrupt and the second element says why. Every script reads the record
// with luaGet and parses it with record() (luaRecord), which finds it corrupt when the
// Redis key is not a string (another application's hash at the record's
// name, say) or holds a value that is no v3 record: the script then
// answers -1, before any write, never with Redis's WRONGTYPE error, which
// would read as an outage, and never as the nearest state. Two paths skip
// parse(), to keep the common transitions cheap: a completed record is
// passed to the client, which decodes it (decodeValue) as strictly; and
// finish writes over a record that starts with the caller's own token
// (see finishScript) without reading the rest. A waiter set of another
// type is corrupt the same way, before the claim or finish that would use
// it writes anything.

// luaGet starts every script: v is KEYS[1]'s value, false when absent, or
// an error table when the key is no string. Each script's common path
// follows it, before luaRecord defines the functions the other paths use
// (a closure made on every call costs server CPU too).
const luaGet = `
local v = redis.pcall('GET', KEYS[1])
`

// luaRecord defines parse(v): the value parsed (att is 1 for a claim of
// layout 3, which keeps no attempt), or nil and the reason it is no record
// the store can read; record(): v parsed, false when absent, or nil and the
// reason (the key is no string, or parse's); pttl(): KEYS[1]'s PTTL, or
// nil when it has no expiry. Replies that carry a completed record pass its
// value on unparsed (a claim, a get): the client decodes it and finds it
// corrupt as strictly.
const luaRecord = `
local function num(n)
  return (#n < 16 or #n == 16 and n <= '9007199254740992') and (#n == 1 or string.byte(n, 1) ~= 48)
end
local function parse(v)
  local lay, st, w, fen, ol, at = string.match(v, '^([34])([pcfr])([01])(%d+):(%d+):()')
  if not lay then
    local b = string.sub(v, 1, 1)
    if b ~= '3' and b ~= '4' then return nil, 'not a v3 record (a value of another format or application)' end
    return nil, 'garbled v3 header'
  end
  if fen == '0' or not num(fen) or not num(ol) then return nil, 'a number of the header is 0, too long or not canonical' end
  ol = tonumber(ol)
  local own = string.sub(v, at, at + ol - 1)
  if #own < ol then return nil, 'shorter than its header says' end
  at = at + ol
  local att = 1
  if lay == '4' then
    if st ~= 'p' and st ~= 'r' then return nil, 'a completed record of layout 4' end
    local a, at1 = string.match(v, '^(%d+):()', at)
    if not a then return nil, 'garbled v3 header' end
    if a == '0' or not num(a) then return nil, 'a number of the header is 0, too long or not canonical' end
    att, at = tonumber(a), at1
  end
  local ms, fl, at2 = string.match(v, '^(%d+):(%d+):()', at)
  if not ms then return nil, 'garbled v3 header' end
  if not num(ms) or not num(fl) then return nil, 'a number of the header is too long or not canonical' end
  local tail = at2 + tonumber(fl)
  if tail - 1 > #v then return nil, 'shorter than its header says' end
  if (st == 'p' or st == 'r') and tail <= #v then return nil, 'a result after a record in progress or released' end
  return {v = v, st = st, w = w, fen = fen, att = att, ms = tonumber(ms), own = own, fp = string.sub(v, at2, tail - 1)}
end
local function record()
  if type(v) == 'table' then return nil, 'not a string: ' .. redis.call('TYPE', KEYS[1]).ok end
  if not v then return false end
  return parse(v)
end
local function pttl()
  local t = redis.call('PTTL', KEYS[1])
  if t < 0 then return nil end
  return t
end
local function notSet()
  return 'its waiter set (' .. KEYS[2] .. ') is not a set: ' .. redis.call('TYPE', KEYS[2]).ok
end
`

// luaFloor sets floor to fence.Floor of the server's clock, read now:
// the whole microseconds from fence.Epoch (1735689600, fence.EpochUnix),
// at least 1 and at most 2^53 (fence.Max). TIME answers seconds and
// microseconds; (seconds - epoch) * 1e6 + micros is an integer below 2^53
// until the year 2310, which a Lua double holds exactly, and beyond that
// it only grows, so the clamp still gives 2^53 (TestClaimFloorIsServerTime
// checks it against fence.Floor). Reading TIME before a write needs
// effects replication (replicas get the write, not the script to run on
// their own clock), which the scripts need for PTTL already (Redis 5 and
// later by default, the only mode since 7.0; see docs/redis.md).
const luaFloor = `
local now = redis.call('TIME')
local floor = math.min(math.max((tonumber(now[1]) - 1735689600) * 1000000 + tonumber(now[2]), 1), 9007199254740992)
`

// claimScript: ARGV = owner, lease ms, ttl ms, fingerprint, waiter member,
// dead owner (the holder the caller found dead, "" or absent for none: a
// record in progress under exactly that owner is taken over as if its
// lease had ended; see liveness.go). The fence floor is the server's clock
// when the script runs (luaFloor), not the client's: a claim that spent
// long on its way to Redis, or came from a client whose clock is off,
// still takes a floor above the fences of the records the key had before
// (docs/redis.md, "Fences"). A claim that creates the record takes the
// floor as its fence and attempt 1; a takeover, fence + 1 or the floor if
// larger, and attempt + 1; the claim of a released record (a new record in
// the same string) fence + 1 or the floor too, and attempt 1. Every claim
// writes layout 4. Replies:
//
//	{1, fence, lease left ms, takeover, attempt}   claimed
//	{2, value, pttl}                               completed
//	{3, value, lease left ms}                      in progress (value: the holder's)
//
// redis.calls: new key GET, TIME, PSETEX; completed GET, PTTL; our own
// claim again GET, PTTL; in progress GET, PTTL, and with a waiter SADD,
// PEXPIRE, and SETRANGE when the waiter flag was 0; takeover or released
// GET, PTTL, TIME, PSETEX.
const claimSrc = luaGet + `
local lease = tonumber(ARGV[2])
local keep = lease + tonumber(ARGV[3])
if v == false then` + luaFloor + `
  local fen = string.format('%d', floor)
  redis.call('PSETEX', KEYS[1], keep, '4p0' .. fen .. ':' .. #ARGV[1] .. ':' .. ARGV[1] .. '1:' .. (keep - lease) .. ':' .. #ARGV[4] .. ':' .. ARGV[4])
  return {1, floor, lease, 0, 1}
end
if type(v) == 'string' then
  local head = string.sub(v, 1, 2)
  if head == '3c' or head == '3f' then return {2, v, redis.call('PTTL', KEYS[1])} end
end
` + luaRecord + `
local r, bad = record()
if not r then return {-1, bad} end
local pt = pttl()
if not pt then return {-1, 'record has no TTL'} end
local takeover, w, att = 0, '0', 1
if r.st == 'p' then
  local left = pt - r.ms
  if r.own == ARGV[1] then return {1, tonumber(r.fen), left, 0, r.att} end
  if left > 0 and (ARGV[6] == '' or r.own ~= ARGV[6]) then
    if ARGV[5] ~= '' then
      local added = redis.pcall('SADD', KEYS[2], ARGV[5])
      if type(added) == 'table' and added.err then return {-1, notSet()} end
      redis.call('PEXPIRE', KEYS[2], left + 60000)
      if r.w == '0' then redis.call('SETRANGE', KEYS[1], 2, '1') end
    end
    return {3, r.v, left}
  end
  takeover, w, att = 1, r.w, r.att + 1
end
if tonumber(r.fen) >= 9007199254740992 then return {-1, 'the fence is at its 2^53 limit'} end
` + luaFloor + `
local fen = string.format('%d', math.max(tonumber(r.fen) + 1, floor))
att = string.format('%d', att)
local px = math.max(pt, keep)
redis.call('PSETEX', KEYS[1], px, '4p' .. w .. fen .. ':' .. #ARGV[1] .. ':' .. ARGV[1] .. att .. ':' ..
  (px - lease) .. ':' .. #ARGV[4] .. ':' .. ARGV[4])
return {1, tonumber(fen), lease, takeover, tonumber(att)}
`

var claimScript = redis.NewScript(claimSrc)

// finishScript completes or releases a claim and wakes the waiters of
// other instances. ARGV = "4p0" and the token's tag (tokenTag: fence and
// owner as the record holds them from byte 3 on), the completed value (""
// to release), ttl ms, inbox channel prefix. The record is the caller's
// when it starts with its layout (3 or 4), its state, a waiter flag and the
// tag: then the script writes without parsing the rest, which it replaces.
// A completion of a record in progress of layout 4 with no waiters, the
// common case, is one comparison of the record's first bytes with ARGV[1].
// A completed value is of layout 3; a release keeps the record's layout.
// Replies:
//
//	{1}                        done
//	{2, value, pttl}           our own completion, replayed
//	{0}                        not the holder: lease lost
//
// redis.calls: complete GET, PSETEX; release GET, SETRANGE; with the
// waiter flag set also SMEMBERS, a PUBLISH per waiter and DEL; a replayed
// completion GET, PTTL.
const finishSrc = luaGet + `
if ARGV[2] ~= '' and type(v) == 'string' and string.sub(v, 1, #ARGV[1]) == ARGV[1] then
  redis.call('PSETEX', KEYS[1], ARGV[3], ARGV[2])
  return {1}
end
local tag, st, w = string.sub(ARGV[1], 4), '', ''
local lay = type(v) == 'string' and string.sub(v, 1, 1)
if (lay == '3' or lay == '4') and string.sub(v, 4, 3 + #tag) == tag then
  st, w = string.sub(v, 2, 2), string.sub(v, 3, 3)
end
` + luaRecord + `
if st == 'p' and (w == '0' or w == '1') then
  local ws = {}
  if w == '1' then
    ws = redis.pcall('SMEMBERS', KEYS[2])
    if ws.err then return {-1, notSet()} end
  end
  if ARGV[2] == '' then
    redis.call('SETRANGE', KEYS[1], 1, 'r0')
  else
    redis.call('PSETEX', KEYS[1], ARGV[3], ARGV[2])
  end
  for _, m in ipairs(ws) do
    local i = string.find(m, ':', 1, true)
    if i then redis.call('PUBLISH', ARGV[4] .. string.sub(m, 1, i - 1), string.sub(m, i + 1)) end
  end
  if w == '1' then redis.call('DEL', KEYS[2]) end
  return {1}
end
local r, bad = record()
if r == nil then return {-1, bad} end
if ARGV[2] == '' then
  if not r or r.st == 'r' then return {1} end
  return {0}
end
if r and (r.st == 'c' or r.st == 'f') and st == r.st then
  local pt = pttl()
  if not pt then return {-1, 'record has no TTL'} end
  return {2, r.v, pt}
end
return {0}
`

var finishScript = redis.NewScript(finishSrc)

// renewScript renews a lease. ARGV = owner, fence, lease ms. Replies {1}
// or {0} (lease lost). redis.calls: GET, PTTL, PSETEX (the same claim, in
// layout 4, with the lease's new offset: the record lives at least the new
// lease plus the record's ms, so it still outlives the lease by the TTL or
// more).
const renewSrc = luaGet + luaRecord + `
local r, bad = record()
if r == nil then return {-1, bad} end
if r and r.st == 'p' and r.own == ARGV[1] and r.fen == ARGV[2] then
  local pt = pttl()
  if not pt then return {-1, 'record has no TTL'} end
  local lease = tonumber(ARGV[3])
  local px = math.max(pt, lease + r.ms)
  redis.call('PSETEX', KEYS[1], px, '4p' .. r.w .. r.fen .. ':' .. #r.own .. ':' .. r.own ..
    string.format('%d', r.att) .. ':' .. (px - lease) .. ':' .. #r.fp .. ':' .. r.fp)
  return {1}
end
return {0}
`

var renewScript = redis.NewScript(renewSrc)

// getScript reads a completed record. Replies {2, value, pttl} or {0}
// (none). redis.calls: GET, and PTTL when completed.
const getSrc = luaGet + `
if v == false then return {0} end
if type(v) == 'string' then
  local head = string.sub(v, 1, 2)
  if head == '3c' or head == '3f' then return {2, v, redis.call('PTTL', KEYS[1])} end
end
` + luaRecord + `
local r, bad = record()
if not r then return {-1, bad} end
return {0}
`

var getScript = redis.NewScript(getSrc)

// forgetScript deletes a completed record. Replies {1} deleted, {0}
// nothing to delete (absent, or released: a released record lives on, so
// that its fence keeps rising, and is left), {3} in progress.
// redis.calls: GET, and DEL of the record and its waiter set when
// completed, then PUBLISH of ARGV[2] to the invalidation channel ARGV[1]
// (when given) in the same step: no instance can read the record between
// the delete and the message, and a client that dies after the call
// cannot leave the delete unannounced.
const forgetSrc = luaGet + luaRecord + `
local r, bad = record()
if r == nil then return {-1, bad} end
if not r or r.st == 'r' then return {0} end
if r.st == 'p' then return {3} end
redis.call('DEL', KEYS[1], KEYS[2])
if ARGV[1] and ARGV[1] ~= '' then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return {1}
`

var forgetScript = redis.NewScript(forgetSrc)

// inspectScript reads a record in any state, writing nothing. Replies
//
//	{0}                            absent or released
//	{1, value, lease left ms}      in progress (lease left ≥ 0)
//	{2, value, pttl}               completed
//
// redis.calls: GET, and PTTL unless absent or released.
const inspectSrc = luaGet + luaRecord + `
local r, bad = record()
if r == nil then return {-1, bad} end
if not r or r.st == 'r' then return {0} end
if r.st ~= 'p' then return {2, r.v, redis.call('PTTL', KEYS[1])} end
local pt = pttl()
if not pt then return {-1, 'record has no TTL'} end
return {1, r.v, math.max(pt - r.ms, 0)}
`

var inspectScript = redis.NewScript(inspectSrc)

var allScripts = []*redis.Script{claimScript, finishScript, renewScript, getScript, forgetScript, inspectScript}

// ScriptSource returns the Lua source of one of the store's scripts:
// "claim", "finish", "renew", "get", "forget" or "inspect" ("" for another
// name).
// Tools that drive the scripts themselves (the benchmark harness runs
// redis-benchmark on the claim script) use it. The claim script's KEYS are
// the record and its waiter set, its ARGV owner, lease ms, ttl ms,
// fingerprint, waiter member ("" for none) and, optional, the dead owner
// to take over ("" or absent for none); it takes the fence floor from the
// server's clock (TIME). (Before, the sixth argument was the fence floor,
// from the client's clock, and the dead owner the seventh.)
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
