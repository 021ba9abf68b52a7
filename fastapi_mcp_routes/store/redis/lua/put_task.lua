-- Keeps a new task, making room for it as its admission says.
-- KEYS: the tasks family (tasks.lua: hash, expiry, ended, results), [5] the task,
--       [6] its owner's tasks
-- ARGV: the time (prelude.lua), [2] id, [3] record, [4] owner (hex), [5] trust, [6] ttl ms,
--       [7] ended (0/1), [8...] the admission (store/policy.py, `Admission.terms`)
-- Returns 0 kept, 1 the owner's bound is full of running tasks, 2 the total is (or of tasks
-- trusted more)
local id, record, owner, trust, ttl = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local key, mine = KEYS[5], KEYS[6]
for _, expired in ipairs(redis.call('ZRANGE', KEXPIRY, '-inf', int(NOW), 'BYSCORE')) do drop_task(expired) end
local family = {mine = mine, ranked = KENDED, drop = drop_task}
function family.count(low, high)
  local held = 0
  for level = low, high do held = held + tonumber(redis.call('HGET', KMETA, 'n' .. level) or 0) end
  return held
end
local refused = admit(family, 8)
if refused ~= 0 then return refused end
local seq = redis.call('HINCRBY', KMETA, 'seq', 1)
redis.call('SET', key, record, 'PX', int(ttl))
redis.call('ZADD', KEXPIRY, int(NOW + ttl), id)
redis.call('ZADD', mine, seq, id)
redis.call('HSET', KMETA, 'o:' .. id, owner, 't:' .. id, trust)
redis.call('HINCRBY', KMETA, 'n' .. trust, 1)
if ARGV[7] == '1' then mark_ended(id, trust) end
local life = renew(KMETA, {KMETA, KEXPIRY, KENDED, KRESULTS}, ttl)
redis.call('PEXPIRE', mine, int(life))
return 0
