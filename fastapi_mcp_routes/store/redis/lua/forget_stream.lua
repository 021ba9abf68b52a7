-- Forgets a stream and its events.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] the stream's number
local id, n = ARGV[2], tonumber(ARGV[3])
if not redis.call('ZSCORE', EXPIRY, id) or state_of(KEYS[5], n) < 0 then return end
discard(id, n)
renew_sessions(0)
