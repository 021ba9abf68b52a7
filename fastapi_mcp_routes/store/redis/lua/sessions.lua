-- The sessions family. KEYS[1] its hash, KEYS[2] its sessions by last use, KEYS[3] by expiry,
-- KEYS[4] its finished streams. A key found inside (another session's, an owner's set) is built
-- from KEYS[1], so it carries the family's hash tag and lives in the same Cluster slot.
local META, LRU, EXPIRY, FINISHED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function session_key(id) return META .. ':session:' .. id end
local function owner_key(owner) return META .. ':owner:' .. owner end
local function next_seq() return redis.call('HINCRBY', META, 'seq', 1) end
local function renew_sessions(life) return renew(META, {META, LRU, EXPIRY, FINISHED}, life) end
local function live(id)
  local deadline = redis.call('ZSCORE', EXPIRY, id)
  return deadline and tonumber(deadline) >= NOW
end
local function bytes_of(field) return tonumber(redis.call('HGET', META, field) or '0') end

local function kept_of(id)
  local kept = {}
  local listed = redis.call('HGET', META, 'k:' .. id)
  if listed then
    for n in string.gmatch(listed, '%d+') do kept[#kept + 1] = tonumber(n) end
  end
  return kept
end
local function save_kept(id, kept)
  if #kept == 0 then
    redis.call('HDEL', META, 'k:' .. id)
  else
    redis.call('HSET', META, 'k:' .. id, table.concat(kept, ' '))
  end
end

local function drop_session(id)
  redis.call('ZREM', LRU, id)
  redis.call('ZREM', EXPIRY, id)
  local f = redis.call('HMGET', META, 'o:' .. id, 'b:' .. id, 'k:' .. id)
  if f[1] then redis.call('ZREM', owner_key(f[1]), id) end
  if f[2] then redis.call('HINCRBY', META, 'bytes', int(-tonumber(f[2]))) end
  if f[3] then
    for n in string.gmatch(f[3], '%d+') do redis.call('ZREM', FINISHED, n .. ':' .. id) end
  end
  redis.call('HDEL', META, 'o:' .. id, 'b:' .. id, 'k:' .. id)
  redis.call('UNLINK', session_key(id))
end

-- Drops the sessions idle past their time, at most `limit` (-1: all); returns their ids.
local function sweep_sessions(limit)
  local ids = redis.call('ZRANGE', EXPIRY, '-inf', '(' .. int(NOW), 'BYSCORE', 'LIMIT', 0, limit)
  for _, id in ipairs(ids) do drop_session(id) end
  return ids
end

local function state_of(key, n) return tonumber(redis.call('HGET', key, 's' .. n) or '-1') end

local function forget_events(key, n, count)
  local first = 1
  while first <= count do  -- in batches: Lua unpacks a few thousand values at most
    local fields = {}
    for i = first, math.min(count, first + 999) do fields[#fields + 1] = 'e' .. n .. '.' .. i end
    redis.call('HDEL', key, unpack(fields))
    first = first + 1000
  end
end

local function take_bytes(id, key, n)
  local f = redis.call('HMGET', key, 'b' .. n, 'c' .. n)
  local bytes = tonumber(f[1] or '0')
  forget_events(key, n, tonumber(f[2] or '0'))
  if bytes > 0 then
    redis.call('HINCRBY', META, 'b:' .. id, int(-bytes))
    redis.call('HINCRBY', META, 'bytes', int(-bytes))
  end
end

local function discard(id, n)
  local key = session_key(id)
  take_bytes(id, key, n)
  redis.call('HDEL', key, 's' .. n, 'b' .. n, 'c' .. n)
  redis.call('ZREM', FINISHED, n .. ':' .. id)
  local kept = kept_of(id)
  for i, m in ipairs(kept) do
    if m == n then
      table.remove(kept, i)
      break
    end
  end
  save_kept(id, kept)
end

local function overflow(id, n)
  local key = session_key(id)
  take_bytes(id, key, n)
  redis.call('HSET', key, 's' .. n, state_of(key, n) + 2, 'b' .. n, 0, 'c' .. n, 0)
end

local function oldest_finished(id)
  local key = session_key(id)
  for _, n in ipairs(kept_of(id)) do
    if state_of(key, n) % 2 == 1 then return n end
  end
  return nil
end
