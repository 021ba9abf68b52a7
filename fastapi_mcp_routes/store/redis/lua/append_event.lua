-- Appends an event to a running stream, making room in the session's and the total bounds of
-- kept bytes, or marks the stream overflowed (its events dropped) when none can be made.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] the stream's number, [4] event, [5] max events,
--       [6] max session bytes, [7] max total bytes
local id, n, event = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local max_events, max_session, max_total = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local key = KEYS[5]
if not live(id) or state_of(key, n) < 0 or state_of(key, n) >= 2 then return end
local size = #event
local own = 'b:' .. id
-- Room in the session's bound: its own finished streams go first, oldest first.
while bytes_of(own) + size > max_session do
  local done = oldest_finished(id)
  if not done then break end
  discard(id, done)
end
-- Room in the total: sessions idle past their time, then anyone's finished streams, the
-- oldest of the lowest trust and never one trusted more than this session's.
if bytes_of('bytes') + size > max_total then sweep_sessions(-1) end
local ceiling = tonumber(redis.call('HGET', key, 'lt') or '0')
while bytes_of('bytes') + size > max_total do
  local head = lowest(FINISHED, ceiling)
  if not head then break end
  local number, other = string.match(head, '^(%d+):(.*)$')
  if redis.call('EXISTS', session_key(other)) == 1 then discard(other, tonumber(number)) else drop_session(other) end
  redis.call('ZREM', FINISHED, head)
end
if state_of(key, n) < 0 then return end  -- it was finished itself, and made room
local count = tonumber(redis.call('HGET', key, 'c' .. n))
if bytes_of(own) + size > max_session or bytes_of('bytes') + size > max_total or count >= max_events then
  overflow(id, n)
else
  redis.call('HSET', key, 'e' .. n .. '.' .. (count + 1), event)
  redis.call('HINCRBY', key, 'c' .. n, 1)
  redis.call('HINCRBY', key, 'b' .. n, size)
  redis.call('HINCRBY', META, own, size)
  redis.call('HINCRBY', META, 'bytes', size)
end
renew_sessions(0)
