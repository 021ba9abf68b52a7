-- Lists the tasks not ended, of one owner or of anyone.
-- KEYS: the tasks family (tasks.lua), [5] the owner's tasks (absent for anyone's)
-- ARGV: the time (prelude.lua), [2] limit
-- Returns the ids of tasks not ended, oldest first
local limit, found = tonumber(ARGV[2]), {}
local ids = redis.call('ZRANGE', KEYS[5] or KEXPIRY, 0, -1)
for _, id in ipairs(ids) do
  if #found >= limit then break end
  if live_task(id) and not redis.call('ZSCORE', KENDED, id) then found[#found + 1] = id end
end
return found
