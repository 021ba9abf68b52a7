-- Keeps a message in its topic's log and publishes it with its id in the log (store/redis/pubsub.py).
-- KEYS: [1] the topic's log (a list of "<ms>-<seq> <message>", oldest first; "<ms>-<seq>" alone
--       for a message too large to keep, so ids go on rising)
-- ARGV: [1] the channel, [2] the message, [3] how many messages the log keeps, [4] its life in ms
--       after the last message, [5] PUBLISH, or SPUBLISH on a Cluster, [6] the largest message
--       it keeps (a larger one is published, not kept)
-- Returns how many connections were handed the message
local log, message = KEYS[1], ARGV[2]
local kind = redis.call('TYPE', log).ok
if kind ~= 'list' and kind ~= 'none' then redis.call('DEL', log) end  -- not a log: a fresh one
-- The id: Redis's clock in ms, and a sequence within a millisecond; never below the last one's.
local t = redis.call('TIME')
local ms, seq = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 0
local last = redis.call('LINDEX', log, -1)
if last then
  local last_ms, last_seq = string.match(last, '^(%d+)-(%d+)')
  if last_ms and tonumber(last_ms) >= ms then ms, seq = tonumber(last_ms), tonumber(last_seq) + 1 end
end
local id = string.format('%d-%d', ms, seq)
local entry = id .. ' ' .. message
redis.call('RPUSH', log, #message <= tonumber(ARGV[6]) and entry or id)
redis.call('LTRIM', log, -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', log, ARGV[4])
return redis.call(ARGV[5], ARGV[1], entry)
