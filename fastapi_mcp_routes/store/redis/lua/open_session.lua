-- Opens a session, making room for it as its admission says.
-- KEYS: the sessions family (sessions.lua: hash, by last use, by expiry, finished streams),
--       [5] the session, [6] its owner's sessions
-- ARGV: the time (prelude.lua), [2] id, [3] record, [4] owner (hex), [5] trust, [6] idle ms,
--       [7...] the admission (store/policy.py, `Admission.terms`)
-- Returns {full (0/1), {ids of the sessions pushed out or idle past their time}}
local id, record, owner, trust = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local idle = tonumber(ARGV[6])
local key, mine = KEYS[5], KEYS[6]
local gone = sweep_sessions(-1)
if redis.call('ZSCORE', EXPIRY, id) then drop_session(id) end
local family = {mine = mine, ranked = LRU}
function family.count(low, high) return redis.call('ZCOUNT', LRU, int(low * BAND), '(' .. int((high + 1) * BAND)) end
function family.drop(other)
  -- The owner's set may still name a session Redis forgot on its own: not one pushed out.
  if redis.call('ZSCORE', EXPIRY, other) then gone[#gone + 1] = other end
  drop_session(other)
end
if admit(family, 7) ~= 0 then return {1, gone} end
local seq = next_seq()
redis.call('HSET', key, 'r', record)
redis.call('PEXPIRE', key, int(idle))
redis.call('ZADD', LRU, int(trust * BAND + seq), id)
redis.call('ZADD', EXPIRY, int(NOW + idle), id)
redis.call('ZADD', mine, seq, id)
redis.call('HSET', META, 'o:' .. id, owner)
local life = renew_sessions(idle)
redis.call('PEXPIRE', mine, int(life))
return {0, gone}
