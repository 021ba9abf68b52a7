-- Keeps a message in its topic's log and publishes it with the log's id for it (store/redis/pubsub.py).
-- KEYS: [1] the topic's log (a stream)
-- ARGV: [1] the channel, [2] the message, [3] the log's length (about), [4] its life in ms after
--       the last message, [5] PUBLISH, or SPUBLISH on a Cluster
-- Returns how many connections were handed the message
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'stream' and kind ~= 'none' then redis.call('DEL', KEYS[1]) end  -- not a log: a fresh one
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'm', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return redis.call(ARGV[5], ARGV[1], id .. ' ' .. ARGV[2])
