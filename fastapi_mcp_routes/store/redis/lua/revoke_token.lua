-- Marks a live token used, so it never runs.
-- KEYS: the tokens family (tokens.lua), [4] the token
-- ARGV: the time (prelude.lua), [2] key, [3] the used mark
if live_token(ARGV[2]) then redis.call('SET', KEYS[4], ARGV[3], 'XX', 'KEEPTTL') end
