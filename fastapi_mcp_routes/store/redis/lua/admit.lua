-- The one routine that executes an eviction policy (store/policy.py, `Admission`) for every
-- record family; the policy itself comes in the script's arguments.
-- The head of `ranked` (scores: trust band + age), unless it is trusted more than `ceiling`.
local function lowest(ranked, ceiling)
  local head = redis.call('ZRANGE', ranked, 0, 0, 'WITHSCORES')
  if #head == 0 or band(head[2]) > ceiling then return nil end
  return head[1]
end

-- The oldest record of trust `trust` in `ranked`, if any.
local function oldest_of(ranked, trust)
  local head = redis.call('ZRANGE', ranked, int(trust * BAND), '(' .. int((trust + 1) * BAND), 'BYSCORE', 'LIMIT', 0, 1)
  return head[1]
end

-- The oldest record of the most crowded trust from `low` to `high` that has one: the trust
-- whose `count` fills the most of its quota, the lower on a tie (store/policy.py, `crowded_first`).
local function victim_of(family, quotas, low, high)
  local chosen, chosen_count, found = nil, 0, nil
  for trust = low, high do
    local head = oldest_of(family.ranked, trust)
    if head then
      local held = family.count(trust, trust)
      if not chosen or held * quotas[chosen + 1] > chosen_count * quotas[trust + 1] then
        chosen, chosen_count, found = trust, held, head
      end
    end
  end
  return found
end

-- Makes room for one new record of a family as the `Admission` in ARGV from `first` on says
-- (`Admission.terms`). `family`: `mine` the zset of the owner's records (by their making),
-- `ranked` the zset of the records a total may push out, `count(low, high)` what the records
-- of trust `low` to `high` weigh, `held()` what the owner's weigh (unless each weighs 1),
-- `drop(id, bound)` forgets a record for 'owner' or 'total'. Returns 0 with room made, 1 when
-- the owner's bound left none, 2 when a total (or a share of one) did.
local function admit(family, first)
  local per_owner, ceiling = tonumber(ARGV[first]), tonumber(ARGV[first + 1])
  local finished_only, until_room = ARGV[first + 2] == '1', ARGV[first + 3] == '1'
  local weight = tonumber(ARGV[first + 4])
  local quotas = {tonumber(ARGV[first + 5]), tonumber(ARGV[first + 6]), tonumber(ARGV[first + 7])}
  local bounds = tonumber(ARGV[first + 8])
  -- No room could be made: nothing is pushed out for it.
  if weight > per_owner then return 1 end
  for i = 1, bounds do
    if weight > tonumber(ARGV[first + 8 + 3 * i]) then return 2 end
  end
  while true do
    local held = family.held and family.held() or redis.call('ZCARD', family.mine)
    if held + weight <= per_owner then break end
    local victim = nil
    for _, id in ipairs(redis.call('ZRANGE', family.mine, 0, finished_only and -1 or 0)) do
      if not finished_only or redis.call('ZSCORE', family.ranked, id) then
        victim = id
        break
      end
    end
    if not victim then return 1 end
    family.drop(victim, 'owner')
    redis.call('ZREM', family.mine, victim)
    if not until_room then break end
  end
  for i = 1, bounds do
    local at = first + 6 + 3 * i
    local low, high, limit = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
    while family.count(low, high) + weight > limit do
      local victim = victim_of(family, quotas, low, math.min(high, ceiling))
      if not victim then return 2 end
      family.drop(victim, 'total')
      if not until_room then break end
    end
  end
  return 0
end
