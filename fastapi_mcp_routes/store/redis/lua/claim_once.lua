-- Keeps a name claimed once, unless it is kept already; refuses a newcomer past the bound.
-- KEYS: [1] the names claimed once
-- ARGV: the time (prelude.lua), [2] name, [3] ttl ms, [4] most names kept
-- Returns 1 when kept now, 0 when kept already, -1 when the bound is reached
local key, name, ttl, most = KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', int(NOW))
if redis.call('ZSCORE', key, name) then return 0 end
if redis.call('ZCARD', key) >= most then return -1 end
redis.call('ZADD', key, int(NOW + ttl), name)
-- The set lives as long as its longest-lived name.
if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, int(ttl)) end
return 1
