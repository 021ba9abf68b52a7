-- Keeps a single-use token, making room for it as its admission says.
-- KEYS: the tokens family (tokens.lua: hash, order, expiry), [4] the token, [5] its owner's tokens
-- ARGV: the time (prelude.lua), [2] key, [3] value, [4] ttl ms, [5] owner (hex), [6] trust,
--       [7...] the admission (store/policy.py, `Admission.terms`)
-- Returns 1 when kept, 0 when full
local ttl, owner, trust = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
return put_token(ARGV[2], ARGV[3], ttl, owner, trust, 7) and 1 or 0
