-- Keeps a name claimed once, unless it is kept already; refuses a newcomer past a bound.
-- KEYS: [1] the names claimed once, [2] (optional) the names of the claimant's owner
-- ARGV: the time (prelude.lua), [2] name, [3] ttl ms, [4] most names kept, [5] most of one owner's
-- Returns 1 when kept now, 0 when kept already, -1 when a bound is reached
local key, owned = KEYS[1], KEYS[2]
local name, ttl, most, most_owned = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', key, '-inf', int(NOW))
if redis.call('ZSCORE', key, name) then return 0 end
if redis.call('ZCARD', key) >= most then return -1 end
if owned then
  redis.call('ZREMRANGEBYSCORE', owned, '-inf', int(NOW))
  if redis.call('ZCARD', owned) >= most_owned then return -1 end
  redis.call('ZADD', owned, int(NOW + ttl), name)
  if redis.call('PTTL', owned) < ttl then redis.call('PEXPIRE', owned, int(ttl)) end
end
redis.call('ZADD', key, int(NOW + ttl), name)
-- Each set lives as long as its longest-lived name.
if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, int(ttl)) end
return 1
