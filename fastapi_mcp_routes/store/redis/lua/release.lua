-- Lets a claim go, if this holder has it.
-- KEYS: [1] the claim
-- ARGV: the time (prelude.lua), [2] holder
if redis.call('HGET', KEYS[1], 'h') == ARGV[2] then redis.call('UNLINK', KEYS[1]) end
