-- Keeps a token another process issued, already used, unless it is known.
-- KEYS: the tokens family (tokens.lua), [4] the token, [5] its owner's tokens
-- ARGV: the time (prelude.lua), [2] key, [3] the used mark, [4] ttl ms, [5] owner (hex),
--       [6] trust, [7...] the admission
-- Returns 1 adopted, 0 known, -1 full
if live_token(ARGV[2]) then return 0 end
local ttl, owner, trust = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
return put_token(ARGV[2], ARGV[3], ttl, owner, trust, 7) and 1 or -1
