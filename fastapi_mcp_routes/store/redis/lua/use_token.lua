-- Uses a token: marks it used when it holds the expected value.
-- KEYS: the tokens family (tokens.lua), [4] the token
-- ARGV: the time (prelude.lua), [2] key, [3] expected value, [4] the used mark
-- Returns the value that was there, or nil
if not live_token(ARGV[2]) then return false end
local key = KEYS[4]
local value = redis.call('GET', key)
if value == ARGV[3] then redis.call('SET', key, ARGV[4], 'KEEPTTL') end
return value
