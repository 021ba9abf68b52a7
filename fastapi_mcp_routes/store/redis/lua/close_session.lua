-- Closes a session with its streams.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id
-- Returns 1 when it was there, else 0
if not redis.call('ZSCORE', EXPIRY, ARGV[2]) then return 0 end
drop_session(ARGV[2])
return 1
