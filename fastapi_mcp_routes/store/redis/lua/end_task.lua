-- Saves a task's last record with its result, making room for the result's bytes.
-- KEYS: the tasks family (tasks.lua), [5] the task, [6] its owner's kept results
-- ARGV: the time (prelude.lua), [2] id, [3] record, [4] the record it replaces, [5] owner (hex),
--       [6] trust, [7] ended (0/1), [8] the result's bytes, [9...] the admission
-- Returns 0 not saved (changed or gone), 1 saved, 2 the owner's bound left no room, 3 the total
-- did (or a share of it)
local id, owner, trust, size = ARGV[2], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[8])
local key, mine = KEYS[5], KEYS[6]
if not live_task(id) or redis.call('GET', key) ~= ARGV[4] then return 0 end
-- Results whose time is up hold no room (this task is live, so it stays).
for _, expired in ipairs(redis.call('ZRANGE', KEXPIRY, '-inf', int(NOW), 'BYSCORE')) do drop_task(expired) end
if size > 0 then
  local family = {mine = mine, ranked = KRESULTS, drop = let_go}
  function family.held() return tonumber(redis.call('HGET', KMETA, 'wo:' .. owner) or '0') end
  function family.count(low, high)
    local held = 0
    for level = low, high do held = held + tonumber(redis.call('HGET', KMETA, 'w' .. level) or 0) end
    return held
  end
  local refused = admit(family, 9)
  if refused ~= 0 then return refused + 1 end
end
redis.call('SET', key, ARGV[3], 'KEEPTTL')
if ARGV[7] == '1' then mark_ended(id, trust) end
if size > 0 then
  local seq = redis.call('HINCRBY', KMETA, 'seq', 1)
  redis.call('ZADD', KRESULTS, int(trust * BAND + seq), id)
  redis.call('ZADD', mine, seq, id)
  redis.call('HSET', KMETA, 'w:' .. id, int(size))
  redis.call('HINCRBY', KMETA, 'w' .. trust, int(size))
  redis.call('HINCRBY', KMETA, 'wo:' .. owner, int(size))
end
local life = renew(KMETA, {KMETA, KEXPIRY, KENDED, KRESULTS}, 0)
if size > 0 then redis.call('PEXPIRE', mine, int(life)) end
return 1
