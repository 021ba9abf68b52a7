-- Marks a stream complete: finished streams are the first to go when room is made.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] the stream's number
local id, n = ARGV[2], tonumber(ARGV[3])
local key = KEYS[5]
local state = state_of(key, n)
if not redis.call('ZSCORE', EXPIRY, id) or state < 0 or state % 2 == 1 then return end
redis.call('HSET', key, 's' .. n, state + 1)
local trust = tonumber(redis.call('HGET', key, 'lt') or '0')
redis.call('ZADD', FINISHED, int(trust * BAND + next_seq()), n .. ':' .. id)
renew_sessions(0)
