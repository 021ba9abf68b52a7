-- Starts a resumable stream of a session, letting its oldest go past `max kept`.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] max kept, [4] trust of its streams
-- Returns the stream's number, or nil for a gone session
local id, max_kept = ARGV[2], tonumber(ARGV[3])
local key = KEYS[5]
if not live(id) then return false end
if redis.call('EXISTS', key) == 0 then
  drop_session(id)  -- Redis forgot it on its own
  return false
end
redis.call('HSETNX', key, 'lt', ARGV[4])
local number = redis.call('HINCRBY', key, 'next', 1)
redis.call('HSET', key, 's' .. number, 0, 'b' .. number, 0, 'c' .. number, 0)
local kept = kept_of(id)
kept[#kept + 1] = number
save_kept(id, kept)
if #kept > max_kept then discard(id, oldest_finished(id) or kept[1]) end
renew_sessions(0)
return number
