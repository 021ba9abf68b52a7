"""The Lua scripts `RedisStore` runs: each method of the `Store` is one script, atomic in Redis.

Every script gets `ARGV[1]` the key prefix and `ARGV[2]` the time in milliseconds, or `''` for
Redis's own clock (`TIME`); its own arguments follow from `ARGV[3]`. Keys are built from the
prefix inside the scripts (so a single Redis, not a Redis Cluster). The layout, under the prefix:

    sessions               hash   seq, bytes (all replay bytes), life; per session id:
                                  o:<id> owner (hex), b:<id> replay bytes, k:<id> kept streams
    sessions:lru           zset   id -> trust band + seq of its last use
    sessions:expiry        zset   id -> the time it is idle past its time (ms)
    sessions:finished      zset   "<n>:<id>" -> trust band + seq of the stream's completion
    sessions:owner:<hex>   zset   id -> seq of its opening
    session:<id>           hash   r (the record, JSON), lt (trust of its streams), next;
                                  per stream n: s<n> state, b<n> bytes, c<n> events, e<n>.<i>
    tokens                 hash   seq, life; o:<key> owner (hex)
    tokens:order           zset   key -> trust band + seq of its keeping
    tokens:expiry          zset   key -> its end (ms)
    tokens:owner:<hex>     zset   key -> seq of its keeping
    token:<key>            string its value
    tasks                  hash   seq, life, n<trust> tasks kept of that trust; o:<id> owner (hex),
                                  t:<id> its holder's trust
    tasks:expiry           zset   id -> its end (ms)
    tasks:ended            zset   id -> trust band + seq of its ending (finished tasks only)
    tasks:results          zset   id -> trust band + seq of its ending (finished tasks whose result
                                  is kept); in `tasks`: w<trust> bytes kept of that trust, w:<id>
                                  a result's bytes, wo:<hex> an owner's
    tasks:results:<hex>    zset   id -> seq of its ending, an owner's kept results
    tasks:owner:<hex>      zset   id -> seq of its making
    task:<id>              string the record (JSON)
    claim:<name>           hash   h holder, d end (ms)
    slots:<pool>           zset   holder -> end (ms)

A score of "trust band + seq" orders records by trust first, then age: the head of the set is
the oldest of the lowest trust, what a bound pushes out first. A record's own key expires with
it (`PEXPIRE`), so Redis forgets a session, its event log and a token on its own. The
bookkeeping of a family (the hash and sets without a per-record name) is renewed together by
every script that writes it, for as long as the longest-lived record may live (`life`), so its
keys expire together once nothing renews them, and never before a record they count.

A stream's state `s<n>` is 0 running, +1 once complete, +2 once overflowed (its events dropped).
"""

from __future__ import annotations

from typing import Final

_PRELUDE: Final = """
local P = ARGV[1]
local function clock()
  if ARGV[2] ~= '' then return tonumber(ARGV[2]) end
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
"""

# The one routine that executes an eviction policy (store/policy.py, `Admission`) in Redis, for
# every record family; the policy itself comes in the script's arguments.
_ADMIT: Final = """
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
"""

_SESSIONS: Final = """
local META = P .. 'sessions'
local LRU = P .. 'sessions:lru'
local EXPIRY = P .. 'sessions:expiry'
local FINISHED = P .. 'sessions:finished'
local function session_key(id) return P .. 'session:' .. id end
local function owner_key(owner) return P .. 'sessions:owner:' .. owner end
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
"""

_TOKENS: Final = """
local TMETA = P .. 'tokens'
local ORDER = P .. 'tokens:order'
local TEXPIRY = P .. 'tokens:expiry'
local function token_key(key) return P .. 'token:' .. key end
local function token_owner_key(owner) return P .. 'tokens:owner:' .. owner end
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
-- total is reached by tokens trusted more.
local function put_token(key, value, ttl, owner, trust, first)
  for _, expired in ipairs(redis.call('ZRANGE', TEXPIRY, '-inf', int(NOW), 'BYSCORE')) do
    drop_token(expired)
  end
  if redis.call('ZSCORE', ORDER, key) then drop_token(key) end
  local mine = token_owner_key(owner)
  local family = {mine = mine, ranked = ORDER, drop = drop_token}
  function family.count(low, high)
    return redis.call('ZCOUNT', ORDER, int(low * BAND), '(' .. int((high + 1) * BAND))
  end
  if admit(family, first) ~= 0 then return false end
  local seq = redis.call('HINCRBY', TMETA, 'seq', 1)
  redis.call('SET', token_key(key), value, 'PX', int(ttl))
  redis.call('ZADD', ORDER, int(trust * BAND + seq), key)
  redis.call('ZADD', TEXPIRY, int(NOW + ttl), key)
  redis.call('ZADD', mine, seq, key)
  redis.call('HSET', TMETA, 'o:' .. key, owner)
  local life = renew(TMETA, {TMETA, ORDER, TEXPIRY}, ttl)
  redis.call('PEXPIRE', mine, int(life))
  return true
end
"""

_TASKS: Final = """
local KMETA = P .. 'tasks'
local KEXPIRY = P .. 'tasks:expiry'
local KENDED = P .. 'tasks:ended'
local KRESULTS = P .. 'tasks:results'
local function task_key(id) return P .. 'task:' .. id end
local function task_owner_key(owner) return P .. 'tasks:owner:' .. owner end
local function result_owner_key(owner) return P .. 'tasks:results:' .. owner end
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
"""


def _script(*parts: str) -> str:
    return "\n".join(parts)


# -- sessions ----------------------------------------------------------------------------------

# ARGV: id, record, owner, trust, idle ms, then the admission -> {full (0/1), {gone ids}}
OPEN_SESSION: Final = _script(
    _PRELUDE,
    _ADMIT,
    _SESSIONS,
    """
local id, record, owner, trust = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local idle = tonumber(ARGV[7])
local gone = sweep_sessions(-1)
if redis.call('ZSCORE', EXPIRY, id) then drop_session(id) end
local mine = owner_key(owner)
local family = {mine = mine, ranked = LRU}
function family.count(low, high) return redis.call('ZCOUNT', LRU, int(low * BAND), '(' .. int((high + 1) * BAND)) end
function family.drop(other)
  -- The owner's set may still name a session Redis forgot on its own: not one pushed out.
  if redis.call('ZSCORE', EXPIRY, other) then gone[#gone + 1] = other end
  drop_session(other)
end
if admit(family, 8) ~= 0 then return {1, gone} end
local seq = next_seq()
redis.call('HSET', session_key(id), 'r', record)
redis.call('PEXPIRE', session_key(id), int(idle))
redis.call('ZADD', LRU, int(trust * BAND + seq), id)
redis.call('ZADD', EXPIRY, int(NOW + idle), id)
redis.call('ZADD', mine, seq, id)
redis.call('HSET', META, 'o:' .. id, owner)
local life = renew_sessions(idle)
redis.call('PEXPIRE', mine, int(life))
return {0, gone}
""",
)

# ARGV: id, idle ms -> the record, or nil
FIND_SESSION: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
local id, idle = ARGV[3], tonumber(ARGV[4])
local deadline = redis.call('ZSCORE', EXPIRY, id)
if not deadline then return false end
local key = session_key(id)
local record = redis.call('HGET', key, 'r')
if tonumber(deadline) < NOW or not record then
  drop_session(id)
  return false
end
local trust = band(redis.call('ZSCORE', LRU, id) or '0')
redis.call('ZADD', LRU, int(trust * BAND + next_seq()), id)
redis.call('ZADD', EXPIRY, int(NOW + idle), id)
redis.call('PEXPIRE', key, int(idle))
local life = renew_sessions(idle)
local owner = redis.call('HGET', META, 'o:' .. id)
if owner then redis.call('PEXPIRE', owner_key(owner), int(life)) end
return record
""",
)

# ARGV: id, record, the record it replaces -> 1 when saved (the session is live, its record unchanged)
SAVE_SESSION: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
local key = session_key(ARGV[3])
if not live(ARGV[3]) or redis.call('HGET', key, 'r') ~= ARGV[5] then return 0 end
redis.call('HSET', key, 'r', ARGV[4])
return 1
""",
)

# ARGV: id -> 1 when it was there
CLOSE_SESSION: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
if not redis.call('ZSCORE', EXPIRY, ARGV[3]) then return 0 end
drop_session(ARGV[3])
return 1
""",
)

# -- resumable streams -------------------------------------------------------------------------

# ARGV: id, max kept, trust -> the stream's number, or nil for a gone session
START_STREAM: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
local id, max_kept = ARGV[3], tonumber(ARGV[4])
local key = session_key(id)
if not live(id) then return false end
if redis.call('EXISTS', key) == 0 then
  drop_session(id)  -- Redis forgot it on its own
  return false
end
redis.call('HSETNX', key, 'lt', ARGV[5])
local number = redis.call('HINCRBY', key, 'next', 1)
redis.call('HSET', key, 's' .. number, 0, 'b' .. number, 0, 'c' .. number, 0)
local kept = kept_of(id)
kept[#kept + 1] = number
save_kept(id, kept)
if #kept > max_kept then discard(id, oldest_finished(id) or kept[1]) end
renew_sessions(0)
return number
""",
)

# ARGV: id, number, event, max events, max session bytes, max total bytes
APPEND_EVENT: Final = _script(
    _PRELUDE,
    _ADMIT,
    _SESSIONS,
    """
local id, n, event = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local max_events, max_session, max_total = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local key = session_key(id)
if not live(id) or state_of(key, n) < 0 or state_of(key, n) >= 2 then return end
local size = #event
local own = 'b:' .. id
-- Room in the session's bound: its own finished streams go first, oldest first.
while bytes_of(own) + size > max_session do
  local done = oldest_finished(id)
  if not done then break end
  discard(id, done)
end
-- Room in the total: sessions idle past their time, then anyone's finished streams, the
-- oldest of the lowest trust and never one trusted more than this session's.
if bytes_of('bytes') + size > max_total then sweep_sessions(-1) end
local ceiling = tonumber(redis.call('HGET', key, 'lt') or '0')
while bytes_of('bytes') + size > max_total do
  local head = lowest(FINISHED, ceiling)
  if not head then break end
  local number, other = string.match(head, '^(%d+):(.*)$')
  if redis.call('EXISTS', session_key(other)) == 1 then discard(other, tonumber(number)) else drop_session(other) end
  redis.call('ZREM', FINISHED, head)
end
if state_of(key, n) < 0 then return end  -- it was finished itself, and made room
local count = tonumber(redis.call('HGET', key, 'c' .. n))
if bytes_of(own) + size > max_session or bytes_of('bytes') + size > max_total or count >= max_events then
  overflow(id, n)
else
  redis.call('HSET', key, 'e' .. n .. '.' .. (count + 1), event)
  redis.call('HINCRBY', key, 'c' .. n, 1)
  redis.call('HINCRBY', key, 'b' .. n, size)
  redis.call('HINCRBY', META, own, size)
  redis.call('HINCRBY', META, 'bytes', size)
end
renew_sessions(0)
""",
)

# ARGV: id, number
COMPLETE_STREAM: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
local id, n = ARGV[3], tonumber(ARGV[4])
local key = session_key(id)
local state = state_of(key, n)
if not redis.call('ZSCORE', EXPIRY, id) or state < 0 or state % 2 == 1 then return end
redis.call('HSET', key, 's' .. n, state + 1)
local trust = tonumber(redis.call('HGET', key, 'lt') or '0')
redis.call('ZADD', FINISHED, int(trust * BAND + next_seq()), n .. ':' .. id)
renew_sessions(0)
""",
)

# ARGV: id, number, after -> {complete (0/1), {events}}, or nil when it cannot be resumed
READ_STREAM: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
local id, n, after = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local key = session_key(id)
local state = state_of(key, n)
if not redis.call('ZSCORE', EXPIRY, id) or state < 0 or state >= 2 then return false end
local count = tonumber(redis.call('HGET', key, 'c' .. n))
if after > count then return false end
local events = {}
local first = after + 1
while first <= count do
  local fields = {}
  for i = first, math.min(count, first + 999) do fields[#fields + 1] = 'e' .. n .. '.' .. i end
  for _, event in ipairs(redis.call('HMGET', key, unpack(fields))) do events[#events + 1] = event end
  first = first + 1000
end
return {state % 2, events}
""",
)

# ARGV: id, number
FORGET_STREAM: Final = _script(
    _PRELUDE,
    _SESSIONS,
    """
local id, n = ARGV[3], tonumber(ARGV[4])
if not redis.call('ZSCORE', EXPIRY, id) or state_of(session_key(id), n) < 0 then return end
discard(id, n)
renew_sessions(0)
""",
)

# -- claims and slots --------------------------------------------------------------------------

# ARGV: name, holder, ttl ms -> 1 when held
CLAIM: Final = _script(
    _PRELUDE,
    """
local key, holder, ttl = P .. 'claim:' .. ARGV[3], ARGV[4], tonumber(ARGV[5])
local held = redis.call('HMGET', key, 'h', 'd')
if held[1] and held[1] ~= holder and tonumber(held[2]) > NOW then return 0 end
redis.call('HSET', key, 'h', holder, 'd', int(NOW + ttl))
redis.call('PEXPIRE', key, int(ttl))
return 1
""",
)

# ARGV: name, holder
RELEASE: Final = _script(
    _PRELUDE,
    """
local key = P .. 'claim:' .. ARGV[3]
if redis.call('HGET', key, 'h') == ARGV[4] then redis.call('UNLINK', key) end
""",
)

# ARGV: holder, ttl ms, then pool names and limits in pairs -> 0 when taken, else the first
# full pool's position (from 1)
TAKE_SLOTS: Final = _script(
    _PRELUDE,
    """
local holder, ttl = ARGV[3], tonumber(ARGV[4])
local pools = (#ARGV - 4) / 2
for i = 1, pools do
  local key, limit = P .. 'slots:' .. ARGV[3 + 2 * i], tonumber(ARGV[4 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(NOW))
  if not redis.call('ZSCORE', key, holder) and redis.call('ZCARD', key) >= limit then return i end
end
for i = 1, pools do
  local key = P .. 'slots:' .. ARGV[3 + 2 * i]
  redis.call('ZADD', key, int(NOW + ttl), holder)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, int(ttl)) end
end
return 0
""",
)

# ARGV: holder, then pool names
FREE_SLOTS: Final = _script(
    _PRELUDE,
    """
for i = 4, #ARGV do redis.call('ZREM', P .. 'slots:' .. ARGV[i], ARGV[3]) end
""",
)

# -- single-use tokens -------------------------------------------------------------------------

# ARGV: key, value, ttl ms, owner, trust, then the admission -> 1 when kept, 0 when full
PUT_TOKEN: Final = _script(
    _PRELUDE,
    _ADMIT,
    _TOKENS,
    """
local ttl, owner, trust = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
return put_token(ARGV[3], ARGV[4], ttl, owner, trust, 8) and 1 or 0
""",
)

# ARGV: key, used, ttl ms, owner, trust, then the admission -> 1 adopted, 0 known, -1 full
ADOPT_TOKEN: Final = _script(
    _PRELUDE,
    _ADMIT,
    _TOKENS,
    """
if live_token(ARGV[3]) then return 0 end
local ttl, owner, trust = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
return put_token(ARGV[3], ARGV[4], ttl, owner, trust, 8) and 1 or -1
""",
)

# ARGV: key, expected, used -> the value that was there, or nil
USE_TOKEN: Final = _script(
    _PRELUDE,
    _TOKENS,
    """
if not live_token(ARGV[3]) then return false end
local key = token_key(ARGV[3])
local value = redis.call('GET', key)
if value == ARGV[4] then redis.call('SET', key, ARGV[5], 'KEEPTTL') end
return value
""",
)

# ARGV: key, used
REVOKE_TOKEN: Final = _script(
    _PRELUDE,
    _TOKENS,
    """
if live_token(ARGV[3]) then redis.call('SET', token_key(ARGV[3]), ARGV[4], 'XX', 'KEEPTTL') end
""",
)

# -- tasks -------------------------------------------------------------------------------------

# ARGV: id, record, owner, trust, ttl ms, ended (0/1), then the admission
# -> 0 kept, 1 the owner's bound is full of running tasks, 2 the total is (or of tasks trusted more)
PUT_TASK: Final = _script(
    _PRELUDE,
    _ADMIT,
    _TASKS,
    """
local id, record, owner, trust, ttl = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])
for _, expired in ipairs(redis.call('ZRANGE', KEXPIRY, '-inf', int(NOW), 'BYSCORE')) do drop_task(expired) end
local mine = task_owner_key(owner)
local family = {mine = mine, ranked = KENDED, drop = drop_task}
function family.count(low, high)
  local held = 0
  for level = low, high do held = held + tonumber(redis.call('HGET', KMETA, 'n' .. level) or 0) end
  return held
end
local refused = admit(family, 9)
if refused ~= 0 then return refused end
local seq = redis.call('HINCRBY', KMETA, 'seq', 1)
redis.call('SET', task_key(id), record, 'PX', int(ttl))
redis.call('ZADD', KEXPIRY, int(NOW + ttl), id)
redis.call('ZADD', mine, seq, id)
redis.call('HSET', KMETA, 'o:' .. id, owner, 't:' .. id, trust)
redis.call('HINCRBY', KMETA, 'n' .. trust, 1)
if ARGV[8] == '1' then mark_ended(id, trust) end
local life = renew(KMETA, {KMETA, KEXPIRY, KENDED, KRESULTS}, ttl)
redis.call('PEXPIRE', mine, int(life))
return 0
""",
)

# ARGV: id, record, the record it replaces, owner, trust, ended (0/1), the result's bytes, then
# the admission -> 0 not saved (changed or gone), 1 saved, 2 the owner's bound left no room,
# 3 the total did (or a share of it)
END_TASK: Final = _script(
    _PRELUDE,
    _ADMIT,
    _TASKS,
    """
local id, owner, trust, size = ARGV[3], ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[9])
if not live_task(id) or redis.call('GET', task_key(id)) ~= ARGV[5] then return 0 end
-- Results whose time is up hold no room (this task is live, so it stays).
for _, expired in ipairs(redis.call('ZRANGE', KEXPIRY, '-inf', int(NOW), 'BYSCORE')) do drop_task(expired) end
local mine = result_owner_key(owner)
if size > 0 then
  local family = {mine = mine, ranked = KRESULTS, drop = let_go}
  function family.held() return tonumber(redis.call('HGET', KMETA, 'wo:' .. owner) or '0') end
  function family.count(low, high)
    local held = 0
    for level = low, high do held = held + tonumber(redis.call('HGET', KMETA, 'w' .. level) or 0) end
    return held
  end
  local refused = admit(family, 10)
  if refused ~= 0 then return refused + 1 end
end
redis.call('SET', task_key(id), ARGV[4], 'KEEPTTL')
if ARGV[8] == '1' then mark_ended(id, trust) end
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
""",
)

# ARGV: id -> the record, or nil once its time is up
FIND_TASK: Final = _script(
    _PRELUDE,
    _TASKS,
    """
if not live_task(ARGV[3]) then return false end
return redis.call('GET', task_key(ARGV[3]))
""",
)

# ARGV: id, record, the record it replaces, trust, ended (0/1) -> 1 when saved
SAVE_TASK: Final = _script(
    _PRELUDE,
    _TASKS,
    """
local id = ARGV[3]
if not live_task(id) or redis.call('GET', task_key(id)) ~= ARGV[5] then return 0 end
redis.call('SET', task_key(id), ARGV[4], 'KEEPTTL')
if ARGV[7] == '1' then
  mark_ended(id, tonumber(ARGV[6]))
  -- The ended set may be new here (every task was running when last put): it expires with the rest.
  renew(KMETA, {KMETA, KEXPIRY, KENDED, KRESULTS}, 0)
end
return 1
""",
)

# ARGV: owner (hex, or '' for anyone), limit -> ids of tasks not ended, oldest first
RUNNING_TASKS: Final = _script(
    _PRELUDE,
    _TASKS,
    """
local limit, found = tonumber(ARGV[4]), {}
local ids
if ARGV[3] ~= '' then
  ids = redis.call('ZRANGE', task_owner_key(ARGV[3]), 0, -1)
else
  ids = redis.call('ZRANGE', KEXPIRY, 0, -1)
end
for _, id in ipairs(ids) do
  if #found >= limit then break end
  if live_task(id) and not redis.call('ZSCORE', KENDED, id) then found[#found + 1] = id end
end
return found
""",
)
