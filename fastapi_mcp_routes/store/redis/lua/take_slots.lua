-- Takes a slot in every pool, or in none when one is full.
-- KEYS: the pools (all under the slots' hash tag)
-- ARGV: the time (prelude.lua), [2] holder, [3] ttl ms, [4...] each pool's limit, in the order of KEYS
-- Returns 0 when taken, else the first full pool's position (from 1)
local holder, ttl = ARGV[2], tonumber(ARGV[3])
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(NOW))
  if not redis.call('ZSCORE', key, holder) and redis.call('ZCARD', key) >= tonumber(ARGV[3 + i]) then return i end
end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, int(NOW + ttl), holder)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, int(ttl)) end
end
return 0
