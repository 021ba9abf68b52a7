-- Whether a holder has a slot in a pool now (taken, not freed, not lapsed).
-- KEYS: [1] the pool (under the slots' hash tag)
-- ARGV: the time (prelude.lua), [2] holder
-- Returns 1 when it has, else 0
local ends = redis.call('ZSCORE', KEYS[1], ARGV[2])
if ends and tonumber(ends) > NOW then return 1 end
return 0
