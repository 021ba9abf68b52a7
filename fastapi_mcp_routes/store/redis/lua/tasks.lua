-- The tasks family. KEYS[1] its hash, KEYS[2] its tasks by expiry, KEYS[3] the ended ones,
-- KEYS[4] those whose result is kept. A key found inside (a task, an owner's sets) is built
-- from KEYS[1], so it carries the family's hash tag and lives in the same Cluster slot.
local KMETA, KEXPIRY, KENDED, KRESULTS = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local function task_key(id) return KMETA .. ':task:' .. id end
local function task_owner_key(owner) return KMETA .. ':owner:' .. owner end
local function result_owner_key(owner) return KMETA .. ':results:' .. owner end
local function live_task(id)
  local deadline = redis.call('ZSCORE', KEXPIRY, id)
  return deadline and tonumber(deadline) > NOW
end

-- Takes a kept result out of the bookkeeping of its bytes.
local function forget_result(id)
  local f = redis.call('HMGET', KMETA, 'w:' .. id, 'o:' .. id, 't:' .. id)
  if not f[1] then return end
  local weight = tonumber(f[1])
  if f[3] then redis.call('HINCRBY', KMETA, 'w' .. f[3], int(-weight)) end
  if f[2] then
    redis.call('ZREM', result_owner_key(f[2]), id)
    if redis.call('HINCRBY', KMETA, 'wo:' .. f[2], int(-weight)) <= 0 then redis.call('HDEL', KMETA, 'wo:' .. f[2]) end
  end
  redis.call('ZREM', KRESULTS, id)
  redis.call('HDEL', KMETA, 'w:' .. id)
end

-- Drops a finished task's result to make room; the task stays, saying which bound let it go.
local function let_go(id, bound)
  forget_result(id)
  local raw = redis.call('GET', task_key(id))
  if raw then
    local record = cjson.decode(raw)
    record['outcome'] = cjson.null
    record['released'] = bound
    redis.call('SET', task_key(id), cjson.encode(record), 'KEEPTTL')
  end
end

local function drop_task(id)
  forget_result(id)
  redis.call('ZREM', KEXPIRY, id)
  redis.call('ZREM', KENDED, id)
  local owner = redis.call('HGET', KMETA, 'o:' .. id)
  if owner then redis.call('ZREM', task_owner_key(owner), id) end
  local trust = redis.call('HGET', KMETA, 't:' .. id)
  if trust then redis.call('HINCRBY', KMETA, 'n' .. trust, -1) end
  redis.call('HDEL', KMETA, 'o:' .. id, 't:' .. id)
  redis.call('UNLINK', task_key(id))
end

local function mark_ended(id, trust)
  if not redis.call('ZSCORE', KENDED, id) then
    redis.call('ZADD', KENDED, int(trust * BAND + redis.call('HINCRBY', KMETA, 'seq', 1)), id)
  end
end
