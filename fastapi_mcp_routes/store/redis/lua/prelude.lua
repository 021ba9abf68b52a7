-- What every script shares. ARGV[1]: the time in milliseconds, or '' for Redis's own clock
-- (TIME); each script's own arguments follow from ARGV[2].
local function clock()
  if ARGV[1] ~= '' then return tonumber(ARGV[1]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local NOW = clock()
-- 2^48: a trust's band of scores; the seq inside it counts to 10^14 before it spills over.
local BAND = 281474976710656
-- Numbers as Redis arguments: Lua would print a large one as 1e+15.
local function int(x) return string.format('%d', x) end
local function band(score) return math.floor(tonumber(score) / BAND) end
-- Renews a family's bookkeeping keys to its longest life; returns that life.
local function renew(meta, keys, life)
  local kept = tonumber(redis.call('HGET', meta, 'life') or '0')
  if life > kept then
    redis.call('HSET', meta, 'life', int(life))
    kept = life
  end
  for _, key in ipairs(keys) do redis.call('PEXPIRE', key, int(kept)) end
  return kept
end
