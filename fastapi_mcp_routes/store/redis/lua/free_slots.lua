-- Frees a holder's slot in every pool.
-- KEYS: the pools (all under the slots' hash tag)
-- ARGV: the time (prelude.lua), [2] holder
for _, key in ipairs(KEYS) do redis.call('ZREM', key, ARGV[2]) end
