-- Reads a stream's events after a given one, to resume it.
-- KEYS: the sessions family (sessions.lua), [5] the session
-- ARGV: the time (prelude.lua), [2] id, [3] the stream's number, [4] the last event read
-- Returns {complete (0/1), {events}}, or nil when it cannot be resumed
local id, n, after = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local key = KEYS[5]
local state = state_of(key, n)
if not redis.call('ZSCORE', EXPIRY, id) or state < 0 or state >= 2 then return false end
local count = tonumber(redis.call('HGET', key, 'c' .. n))
if after > count then return false end
local events = {}
local first = after + 1
while first <= count do
  local fields = {}
  for i = first, math.min(count, first + 999) do fields[#fields + 1] = 'e' .. n .. '.' .. i end
  for _, event in ipairs(redis.call('HMGET', key, unpack(fields))) do events[#events + 1] = event end
  first = first + 1000
end
return {state % 2, events}
