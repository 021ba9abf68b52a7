-- Takes or renews a claim, unless another holder has it.
-- KEYS: [1] the claim
-- ARGV: the time (prelude.lua), [2] holder, [3] ttl ms
-- Returns 1 when held, else 0
local key, holder, ttl = KEYS[1], ARGV[2], tonumber(ARGV[3])
local held = redis.call('HMGET', key, 'h', 'd')
if held[1] and held[1] ~= holder and tonumber(held[2]) > NOW then return 0 end
redis.call('HSET', key, 'h', holder, 'd', int(NOW + ttl))
redis.call('PEXPIRE', key, int(ttl))
return 1
