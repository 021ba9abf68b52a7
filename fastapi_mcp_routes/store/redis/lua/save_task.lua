-- Replaces a live task's record, unless another process changed it first.
-- KEYS: the tasks family (tasks.lua), [5] the task
-- ARGV: the time (prelude.lua), [2] id, [3] record, [4] the record it replaces, [5] trust,
--       [6] ended (0/1)
-- Returns 1 when saved, else 0
local id, key = ARGV[2], KEYS[5]
if not live_task(id) or redis.call('GET', key) ~= ARGV[4] then return 0 end
redis.call('SET', key, ARGV[3], 'KEEPTTL')
if ARGV[6] == '1' then
  mark_ended(id, tonumber(ARGV[5]))
  -- The ended set may be new here (every task was running when last put): it expires with the rest.
  renew(KMETA, {KMETA, KEXPIRY, KENDED, KRESULTS}, 0)
end
return 1
