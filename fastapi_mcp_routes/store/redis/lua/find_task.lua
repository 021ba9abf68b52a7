-- Finds a task whose time is not up.
-- KEYS: the tasks family (tasks.lua), [5] the task
-- ARGV: the time (prelude.lua), [2] id
-- Returns the record, or nil
if not live_task(ARGV[2]) then return false end
return redis.call('GET', KEYS[5])
