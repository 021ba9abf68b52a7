-- Finds a live session and restarts its idle time.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] idle ms
-- Returns the record, or nil
local id, idle = ARGV[2], tonumber(ARGV[3])
local key = KEYS[5]
local deadline = redis.call('ZSCORE', EXPIRY, id)
if not deadline then return false end
local record = redis.call('HGET', key, 'r')
if tonumber(deadline) < NOW or not record then
  drop_session(id)
  return false
end
local trust = band(redis.call('ZSCORE', LRU, id) or '0')
redis.call('ZADD', LRU, int(trust * BAND + next_seq()), id)
redis.call('ZADD', EXPIRY, int(NOW + idle), id)
redis.call('PEXPIRE', key, int(idle))
local life = renew_sessions(idle)
local owner = redis.call('HGET', META, 'o:' .. id)
if owner then redis.call('PEXPIRE', owner_key(owner), int(life)) end
return record
