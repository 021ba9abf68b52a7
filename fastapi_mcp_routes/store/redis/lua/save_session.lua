-- Replaces a live session's record, unless another process changed it first.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] record, [4] the record it replaces
-- Returns 1 when saved (the session is live, its record unchanged), else 0
local key = KEYS[5]
if not live(ARGV[2]) or redis.call('HGET', key, 'r') ~= ARGV[4] then return 0 end
redis.call('HSET', key, 'r', ARGV[3])
return 1
