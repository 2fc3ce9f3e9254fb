"""The server-side scripts of the Redis backend: every write that must be atomic.

Each is one Lua script run by ``EVALSHA`` (redis-py's ``register_script``), so the
server runs it whole with no other command between its steps: an append checks the
writer's lease and the stored log's last seq, then adds the batch, its header, its
counts and its projection rows, or it refuses and writes nothing. The key names are
:mod:`.keys`' (a script builds the names of a session's projection keys from its base,
in the session's hash tag, so they stay in its slot).

Every script starts with ``#!lua`` (Redis 7): the server refuses it whole when it is out
of memory, before any step runs, rather than at a write in its middle.

A refusal is returned, never raised, as a list whose first item says why:
``{'seq', last}`` (the stored log does not end right before the batch), ``{'lost'}``
(the writer's lease is gone: expired, or released, and nobody holds it),
``{'locked', holder, epoch}`` (another writer holds the lease), ``{'missing'}``.
:func:`refusal` is the error a refusal raises, and :func:`landed_ids` where to look
first for a refused batch that had landed already; the synchronous writes and their
asyncio twins (:mod:`.aio`) both use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ....errors import PersistenceError, SessionLockedError
from .lease import holder_text

__all__ = ["ACQUIRE", "APPEND", "DELETE", "DROP_ROWS", "LINES", "RELEASE", "RENEW", "REPLACE",
           "ROWS", "STATE", "WRITE_ROWS", "landed_ids", "refusal"]


def landed_ids(got: Sequence[Any], before: int, count: int) -> tuple[str, str] | None:
    """The entry ids a batch of ``count`` lines after seq ``before`` would have, when the
    script's refusal ``got`` (``{'seq', last}``) says the stored log reaches past them:
    a retry of a batch whose reply was lost (the client retries a command whose
    connection dropped) finds its own lines there, and succeeds. ``None``: it cannot
    have landed."""
    if got[0] in (b"locked", b"lost") or int(got[1]) < before + count:
        return None
    return f"{before + 1}-1", f"{before + count}-1"


def refusal(session_id: str, got: Sequence[Any], before: int
            ) -> SessionLockedError | PersistenceError:
    """The error a script's refusal ``got`` raises, for the batch after seq ``before``:
    a lease taken over (or lost and not taken back) is a :class:`SessionLockedError`,
    a log that does not end at ``before`` a :class:`PersistenceError`."""
    why = got[0]
    if why in (b"locked", b"lost"):
        holder = holder_text(got[1], got[2]) if why == b"locked" else (
            "its lease expired and could not be taken back")
        msg = (f'session "{session_id}": this writer\'s lease was taken over '
               f"({holder}); its batch was refused and nothing of it written")
        return SessionLockedError(session_id, msg)
    msg = (f'session "{session_id}" was written by another writer: the stored log ends '
           f"at seq {int(got[1])}, but this batch starts at seq {before + 1}; reopen the "
           f"session to continue from what is stored")
    return PersistenceError(msg, session_id=session_id)

#: What the scripts share: the last seq of a log, the lease check, the rows' changes.
_COMMON: Final = r"""
local function last_seq(log)
  local top = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)
  if #top == 0 then return -1 end
  local id = top[1][1]
  return tonumber(string.sub(id, 1, string.find(id, '-', 1, true) - 1))
end

-- nil when the writer may write (its lease renewed), else the refusal.
local function fence(lease, token, ttl)
  if token == '' then return nil end
  local held = redis.call('HMGET', lease, 't', 'h', 'e')
  if held[1] == token then
    redis.call('PEXPIRE', lease, ttl)
    return nil
  end
  if not held[1] then return {'lost'} end
  return {'locked', held[2] or '', held[3] or ''}
end

local function drop_projections(base, marks, sums)
  for _, name in ipairs(redis.call('HKEYS', marks)) do
    redis.call('DEL', base .. 'prows:' .. name, base .. 'pkeys:' .. name)
  end
  redis.call('DEL', marks, sums)
end

-- The rows' changes from ARGV[a] on (their count first); their keys from KEYS[k] on.
local function apply_changes(k, a, marks, sums)
  local m = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, m do
    local name, mark = ARGV[a], ARGV[a + 1]
    local rebuild, clear = ARGV[a + 2] == '1', ARGV[a + 3] == '1'
    local summary_op, summary = ARGV[a + 4], ARGV[a + 5]
    local n = tonumber(ARGV[a + 6])
    a = a + 7
    local rows, keys = KEYS[k], KEYS[k + 1]
    k = k + 2
    if rebuild then redis.call('HDEL', sums, name) end
    if rebuild or clear then redis.call('DEL', rows, keys) end
    for _ = 1, n do
      local key = ARGV[a]
      if ARGV[a + 1] == 's' then
        redis.call('HSET', rows, key, ARGV[a + 2])
        redis.call('ZADD', keys, 0, key)
      else
        redis.call('HDEL', rows, key)
        redis.call('ZREM', keys, key)
      end
      a = a + 3
    end
    if summary_op == 's' then
      redis.call('HSET', sums, name, summary)
    elseif summary_op == 'd' then
      redis.call('HDEL', sums, name)
    end
    redis.call('HSET', marks, name, mark)
  end
end
"""

#: Append a batch. KEYS: log, head, lease, marks, summaries, index (the head again on a
#: cluster: no index there), then each change's rows and row keys. ARGV: token (``''``:
#: no lease), lease ms, the seq the log must end at, the header (``''``: the session
#: is stored), the id, the score in the index (``''``: none), turns in the batch, bytes
#: in the batch, the count of lines, the lines, then the rows' changes.
APPEND: Final = "#!lua\n" + _COMMON + r"""
local log, head, lease = KEYS[1], KEYS[2], KEYS[3]
local refused = fence(lease, ARGV[1], ARGV[2])
if refused then return refused end
local before = tonumber(ARGV[3])
local last = last_seq(log)
if last ~= before then return {'seq', last} end
local n = tonumber(ARGV[9])
for i = 1, n do
  redis.call('XADD', log, string.format('%d-1', before + i), 'l', ARGV[9 + i])
end
if ARGV[4] ~= '' then
  redis.call('HSET', head, 'h', ARGV[4])
  if ARGV[6] ~= '' then redis.call('ZADD', KEYS[6], ARGV[6], ARGV[5]) end
end
redis.call('HINCRBY', head, 'turns', ARGV[7])
redis.call('HINCRBY', head, 'bytes', ARGV[8])
apply_changes(7, 10 + n, KEYS[4], KEYS[5])
return {'ok'}
"""

#: Apply rows' changes alone. KEYS: marks, summaries, then each change's two keys.
#: ARGV: the changes.
WRITE_ROWS: Final = "#!lua\n" + _COMMON + r"""
apply_changes(3, 1, KEYS[1], KEYS[2])
return {'ok'}
"""

#: Cut the log back and append (a repair), or replace it whole (a rewrite). KEYS: log,
#: head, lease, marks, summaries. ARGV: token, lease ms, 'repair' or 'rewrite', the seq
#: to cut from (``''``: none), the header (``''``: keep it), the keys' base, turns in
#: the lines, bytes in the lines, the count of lines, the lines.
REPLACE: Final = "#!lua\n" + _COMMON + r"""
local log, head, lease = KEYS[1], KEYS[2], KEYS[3]
local refused = fence(lease, ARGV[1], ARGV[2])
if refused then return refused end
if redis.call('EXISTS', head) == 0 then return {'missing'} end
local first
if ARGV[3] == 'rewrite' then
  redis.call('DEL', log)
  drop_projections(ARGV[6], KEYS[4], KEYS[5])
  redis.call('HSET', head, 'h', ARGV[5], 'turns', 0, 'bytes', 0)
  first = 0
elseif ARGV[4] ~= '' then
  local cut = tonumber(ARGV[4])
  local turns, bytes = 0, 0
  for _, entry in ipairs(redis.call('XRANGE', log, string.format('%d-0', cut), '+')) do
    local line = entry[2][2]
    if string.sub(line, 1, 21) == '{"type":"turn/start",' then turns = turns + 1 end
    bytes = bytes + #line + 1
    redis.call('XDEL', log, entry[1])
  end
  -- The stream's top goes back to the last kept entry, so that the next append at
  -- seq `cut` is above it.
  if cut == 0 or redis.call('XLEN', log) == 0 then
    redis.call('DEL', log)
  else
    redis.call('XSETID', log, string.format('%d-1', cut - 1))
  end
  redis.call('HINCRBY', head, 'turns', 0 - turns)
  redis.call('HINCRBY', head, 'bytes', 0 - bytes)
  redis.call('HINCRBY', head, 'cuts', 1)
  redis.call('HSET', head, 'cut', cut - 1)
  first = cut
else
  first = last_seq(log) + 1
end
local n = tonumber(ARGV[9])
for i = 1, n do
  redis.call('XADD', log, string.format('%d-1', first + i - 1), 'l', ARGV[9 + i])
end
redis.call('HINCRBY', head, 'turns', ARGV[7])
redis.call('HINCRBY', head, 'bytes', ARGV[8])
return {'ok'}
"""

#: Remove a session whole (or, dry, only measure it). KEYS: log, head, lease, epoch,
#: marks, summaries, index (the head again on a cluster). ARGV: token, '1' for a dry
#: run, the keys' base, the id. Returns ``{'ok', header, events, bytes, last line}``.
DELETE: Final = "#!lua\n" + _COMMON + r"""
local log, head, lease = KEYS[1], KEYS[2], KEYS[3]
if ARGV[1] ~= '' and redis.call('HGET', lease, 't') ~= ARGV[1] then
  return {'locked', redis.call('HGET', lease, 'h') or '', redis.call('HGET', lease, 'e') or ''}
end
local found = redis.call('HMGET', head, 'h', 'bytes')
if not found[1] then return {'missing'} end
local count = redis.call('XLEN', log)
local top = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)
local line = ''
if #top > 0 then line = top[1][2][2] end
if ARGV[2] ~= '1' then
  drop_projections(ARGV[3], KEYS[5], KEYS[6])
  redis.call('DEL', log, head, KEYS[4], lease)
  if KEYS[7] ~= head then redis.call('ZREM', KEYS[7], ARGV[4]) end
end
return {'ok', found[1], count, found[2] or '0', line}
"""

#: Take a session's lease. KEYS: lease, epoch. ARGV: the new token, the connection's
#: id, who takes it, lease ms, the connection id of a holder found gone (``''``: none;
#: its lease is taken over only if it is still that holder's). Returns ``{1, epoch}``,
#: or ``{0, holder's connection id, holder, epoch}``.
ACQUIRE: Final = r"""#!lua
local held = redis.call('HMGET', KEYS[1], 't', 'c', 'h', 'e')
if held[1] and (ARGV[5] == '' or held[2] ~= ARGV[5]) then
  return {0, held[2] or '', held[3] or '', held[4] or ''}
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 't', ARGV[1], 'c', ARGV[2], 'h', ARGV[3], 'e', epoch)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, epoch}
"""

#: Renew a lease still held. KEYS: lease. ARGV: token, the connection's id, lease ms.
RENEW: Final = r"""#!lua
if redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'c', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""

#: Release a lease still held. KEYS: lease. ARGV: token.
RELEASE: Final = r"""#!lua
if redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"""

#: Drop a session's projections: every row, summary and mark. KEYS: marks, summaries.
#: ARGV: the keys' base.
DROP_ROWS: Final = "#!lua\n" + _COMMON + r"""
drop_projections(ARGV[1], KEYS[1], KEYS[2])
return {'ok'}
"""

#: A range of a projection's rows, in key order: the keys (``ZRANGE ... BYLEX``), then
#: their rows, in one snapshot. KEYS: row keys, rows. ARGV: the lowest bound, the
#: highest (as ``ZRANGE BYLEX`` writes them), '1' newest first, the limit (``-1``:
#: none). Returns key, row, key, row...
ROWS: Final = r"""#!lua flags=no-writes
local found
if ARGV[3] == '1' then
  found = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[1], 'BYLEX', 'REV', 'LIMIT', 0, ARGV[4])
else
  found = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYLEX', 'LIMIT', 0, ARGV[4])
end
local out = {}
-- HMGET by the hundreds: a call from a script costs more than the row it reads.
for first = 1, #found, 500 do
  local last = math.min(first + 499, #found)
  local rows = redis.call('HMGET', KEYS[2], unpack(found, first, last))
  for i = first, last do
    out[#out + 1] = found[i]
    out[#out + 1] = rows[i - first + 1] or ''
  end
end
return out
"""

#: A session's header and a range of its lines, joined by ``\n`` into one reply (the
#: client then parses one string, not an entry and a field per event), in one snapshot.
#: KEYS: log, head. ARGV: the first id, the last, the count (``-1``: all). Returns
#: ``{0}`` when the session is not stored, else ``{1, header, lines, count}``.
LINES: Final = r"""#!lua flags=no-writes
local head = redis.call('HGET', KEYS[2], 'h')
if not head then return {0} end
local entries
if ARGV[3] == '-1' then
  entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2])
else
  entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
end
local lines = {}
for i, entry in ipairs(entries) do lines[i] = entry[2][2] end
return {1, head, table.concat(lines, '\n'), #lines}
"""

#: A session's counts and its last entries, in one snapshot (one script a session, so a
#: listing's pipeline of them is consistent per session on a cluster too, where one
#: transaction cannot span sessions). KEYS: log, head. ARGV: how many of the last
#: entries (0: none). Returns the header (``''``: the session is not stored), the count
#: of turns, of cuts, the seq the last cut kept last (``-1``: none), the stream's
#: length, then the last entries' ids and lines, newest first.
STATE: Final = r"""#!lua flags=no-writes
local found = redis.call('HMGET', KEYS[2], 'h', 'turns', 'cuts', 'cut')
local out = {found[1] or '', found[2] or '0', found[3] or '0', found[4] or '-1',
             redis.call('XLEN', KEYS[1])}
if ARGV[1] ~= '0' then
  for _, entry in ipairs(redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', ARGV[1])) do
    out[#out + 1] = entry[1]
    out[#out + 1] = entry[2][2]
  end
end
return out
"""
