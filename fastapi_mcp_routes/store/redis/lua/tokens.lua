-- The tokens family. KEYS[1] its hash, KEYS[2] its tokens in the order they were kept, KEYS[3]
-- by expiry. A key found inside (a token, an owner's set) is built from KEYS[1], so it carries
-- the family's hash tag and lives in the same Cluster slot.
local TMETA, ORDER, TEXPIRY = KEYS[1], KEYS[2], KEYS[3]
local function token_key(key) return TMETA .. ':token:' .. key end
local function token_owner_key(owner) return TMETA .. ':owner:' .. owner end
local function live_token(key)
  local deadline = redis.call('ZSCORE', TEXPIRY, key)
  return deadline and tonumber(deadline) > NOW
end

local function drop_token(key)
  redis.call('ZREM', ORDER, key)
  redis.call('ZREM', TEXPIRY, key)
  local owner = redis.call('HGET', TMETA, 'o:' .. key)
  if owner then redis.call('ZREM', token_owner_key(owner), key) end
  redis.call('HDEL', TMETA, 'o:' .. key)
  redis.call('UNLINK', token_key(key))
end

-- Keeps a token within its bounds (the admission in ARGV from `first` on); false when the
-- total is reached by tokens trusted more. KEYS[4] is the token, KEYS[5] its owner's tokens.
local function put_token(key, value, ttl, owner, trust, first)
  for _, expired in ipairs(redis.call('ZRANGE', TEXPIRY, '-inf', int(NOW), 'BYSCORE')) do
    drop_token(expired)
  end
  if redis.call('ZSCORE', ORDER, key) then drop_token(key) end
  local mine = KEYS[5]
  local family = {mine = mine, ranked = ORDER, drop = drop_token}
  function family.count(low, high)
    return redis.call('ZCOUNT', ORDER, int(low * BAND), '(' .. int((high + 1) * BAND))
  end
  if admit(family, first) ~= 0 then return false end
  local seq = redis.call('HINCRBY', TMETA, 'seq', 1)
  redis.call('SET', KEYS[4], value, 'PX', int(ttl))
  redis.call('ZADD', ORDER, int(trust * BAND + seq), key)
  redis.call('ZADD', TEXPIRY, int(NOW + ttl), key)
  redis.call('ZADD', mine, seq, key)
  redis.call('HSET', TMETA, 'o:' .. key, owner)
  local life = renew(TMETA, {TMETA, ORDER, TEXPIRY}, ttl)
  redis.call('PEXPIRE', mine, int(life))
  return true
end
