//! The Lua scripts: every write to a leaf is one of these, atomic on the leaf's hash slot.
//!
//! Scripts run with `EVALSHA`; a node that answers `NOSCRIPT` (restarted, flushed) gets
//! `SCRIPT LOAD` of all of them and the command is sent again (it did not run). Every key a
//! script touches is passed in `KEYS` and shares one hash tag, so each runs in one slot.

use ::redis::Cmd;

/// Check-and-insert of a batch of candidate fingerprints into one leaf.
///
/// `KEYS`: log, state. `ARGV`: the entries the caller's replica covers, the candidates (8-byte
/// little-endian fingerprints, distinct, none of them in the caller's replica), the most
/// entries it may send back, and the last entry the replica covers (empty when it covers
/// none). Replies:
/// - `{0, len, flags, delta}`: done. `len` was the log's length before the append; `delta` holds
///   the entries between the caller's replica and `len`; `flags` has one byte per candidate,
///   `'1'` if the candidate is among those entries (seen), `'0'` if it was appended (new), or is
///   empty when every candidate was new.
/// - `{1, state}`: the leaf is frozen (`F`, splitting) or retired (`I`): nothing was written.
/// - `{2, len}`: the caller is more than the limit behind: sync first; nothing was written.
/// - `{3, len}`: the log is not the one the caller's replica copies: it has fewer entries than
///   the replica covers (deleted and re-created), or another entry where the replica's last
///   one was (Redis lost entries, and others were appended since): resync from zero; nothing
///   was written.
const INSERT: &str = r"
local st = redis.call('GET', KEYS[2])
if st then return {1, st} end
local bytes = redis.call('STRLEN', KEYS[1])
if bytes % 8 ~= 0 then return redis.error_reply('ERR urlseen: log length is not a multiple of 8') end
local len = bytes / 8
local synced = tonumber(ARGV[1])
if synced > len then return {3, len} end
if synced > 0 and #ARGV[4] == 8
  and redis.call('GETRANGE', KEYS[1], (synced - 1) * 8, synced * 8 - 1) ~= ARGV[4] then
  return {3, len}
end
if len - synced > tonumber(ARGV[3]) then return {2, len} end
local cands = ARGV[2]
if len == synced then
  if #cands > 0 then redis.call('APPEND', KEYS[1], cands) end
  return {0, len, '', ''}
end
local delta = redis.call('GETRANGE', KEYS[1], synced * 8, len * 8 - 1)
local recorded = {}
for i = 1, #delta, 8 do recorded[string.sub(delta, i, i + 7)] = true end
local flags = {}
local fresh = {}
for i = 1, #cands, 8 do
  local fp = string.sub(cands, i, i + 7)
  if recorded[fp] then
    flags[#flags + 1] = '1'
  else
    flags[#flags + 1] = '0'
    fresh[#fresh + 1] = fp
  end
end
if #fresh > 0 then redis.call('APPEND', KEYS[1], table.concat(fresh)) end
return {0, len, table.concat(flags), delta}
";

/// Reads a leaf's state and a range of its log, atomically.
///
/// `KEYS`: log, state. `ARGV`: first entry, most entries, and the entry expected just before
/// the first (empty: no check). Reply: `{state or '', len, bytes, 0}`, or `{state or '', len,
/// '', 1}` when the log holds another entry there (the caller's copy is of a log that lost
/// entries: it must resync from zero).
const SYNC: &str = r"
local st = redis.call('GET', KEYS[2]) or ''
local bytes = redis.call('STRLEN', KEYS[1])
if bytes % 8 ~= 0 then return redis.error_reply('ERR urlseen: log length is not a multiple of 8') end
local len = bytes / 8
local from = tonumber(ARGV[1])
if from > 0 and from <= len and #ARGV[3] == 8
  and redis.call('GETRANGE', KEYS[1], (from - 1) * 8, from * 8 - 1) ~= ARGV[3] then
  return {st, len, '', 1}
end
local to = math.min(len, from + tonumber(ARGV[2]))
local data = ''
if to > from then data = redis.call('GETRANGE', KEYS[1], from * 8, to * 8 - 1) end
return {st, len, data, 0}
";

/// Freezes a leaf (idempotent). `KEYS`: state, log. Reply: `{state, len}`.
const FREEZE: &str = r"
local st = redis.call('GET', KEYS[1])
if not st then
  redis.call('SET', KEYS[1], 'F')
  st = 'F'
end
return {st, redis.call('STRLEN', KEYS[2]) / 8}
";

/// Appends one chunk of a splitting parent's log (the part that routes to this child) to the
/// child, exactly once: the child's cursor records the parent-log offset it has received up to.
///
/// `KEYS`: child log, child cursor, child state. `ARGV`: chunk start, chunk end (parent-log
/// entries), fingerprints. Reply: 1 appended, 0 already there, -1 out of order, -2 the child is
/// itself frozen (never, by the protocol).
const MIGRATE: &str = r"
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local s = tonumber(ARGV[1])
local e = tonumber(ARGV[2])
if cur >= e then return 0 end
if cur ~= s then return -1 end
if redis.call('EXISTS', KEYS[3]) == 1 then return -2 end
if #ARGV[3] > 0 then redis.call('APPEND', KEYS[1], ARGV[3]) end
redis.call('SET', KEYS[2], ARGV[2])
return 1
";

/// Creates a namespace's metadata unless it exists. `KEYS`: meta. `ARGV`: params, initial
/// leaves. Reply: the stored params (the caller compares them with its own).
const CREATE: &str = r"
local p = redis.call('HGET', KEYS[1], 'params')
if p then return p end
local c = tonumber(ARGV[2])
local kids = {}
for i = 1, c do
  kids[i] = tostring(i)
  redis.call('HSET', KEYS[1], 'n' .. i, 'L1')
end
redis.call('HSET', KEYS[1], 'format', '1', 'params', ARGV[1], 'version', '1',
  'next', tostring(c + 1), 'n0', 'I0:' .. table.concat(kids, ','))
return ARGV[1]
";

/// Marks leaf `ARGV[1]` splitting with `ARGV[2]` new children (idempotent: a node already
/// splitting or inner is returned as it is). `KEYS`: meta. Reply: the node's record.
const MARK_SPLITTING: &str = r"
local f = 'n' .. ARGV[1]
local rec = redis.call('HGET', KEYS[1], f)
if not rec then return redis.error_reply('ERR urlseen: no node ' .. ARGV[1]) end
if string.sub(rec, 1, 1) ~= 'L' then return rec end
local depth = tonumber(string.sub(rec, 2))
local fan = tonumber(ARGV[2])
local first = redis.call('HINCRBY', KEYS[1], 'next', fan) - fan
local kids = {}
for i = 0, fan - 1 do
  kids[#kids + 1] = tostring(first + i)
  redis.call('HSET', KEYS[1], 'n' .. tostring(first + i), 'L' .. tostring(depth + 1))
end
rec = 'S' .. tostring(depth) .. ':' .. table.concat(kids, ',')
redis.call('HSET', KEYS[1], f, rec)
redis.call('HINCRBY', KEYS[1], 'version', 1)
return rec
";

/// Marks splitting node `ARGV[1]` inner (idempotent). `KEYS`: meta. Reply: the node's record.
const MARK_INNER: &str = r"
local f = 'n' .. ARGV[1]
local rec = redis.call('HGET', KEYS[1], f)
if not rec then return redis.error_reply('ERR urlseen: no node ' .. ARGV[1]) end
if string.sub(rec, 1, 1) == 'S' then
  rec = 'I' .. string.sub(rec, 2)
  redis.call('HSET', KEYS[1], f, rec)
  redis.call('HINCRBY', KEYS[1], 'version', 1)
end
return rec
";

/// Retires a split parent: state `I` (writes and reads are refused), log deleted.
/// `KEYS`: state, log, the parent's own migration cursor.
const RETIRE: &str = r"
redis.call('SET', KEYS[1], 'I')
redis.call('DEL', KEYS[2], KEYS[3])
return 1
";

/// Releases a lock if the caller still holds it. `KEYS`: lock. `ARGV`: token.
const UNLOCK: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

/// Extends a lock the caller still holds. `KEYS`: lock. `ARGV`: token, milliseconds.
const EXTEND: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
";

/// Names the scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Script {
    Insert,
    Sync,
    Freeze,
    Migrate,
    Create,
    MarkSplitting,
    MarkInner,
    Retire,
    Unlock,
    Extend,
}

const ALL: [(Script, &str); 10] = [
    (Script::Insert, INSERT),
    (Script::Sync, SYNC),
    (Script::Freeze, FREEZE),
    (Script::Migrate, MIGRATE),
    (Script::Create, CREATE),
    (Script::MarkSplitting, MARK_SPLITTING),
    (Script::MarkInner, MARK_INNER),
    (Script::Retire, RETIRE),
    (Script::Unlock, UNLOCK),
    (Script::Extend, EXTEND),
];

/// The scripts and their SHA1 digests.
#[derive(Debug)]
pub(crate) struct Scripts {
    shas: Vec<String>,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            shas: ALL
                .iter()
                .map(|(_, src)| ::redis::Script::new(src).get_hash().to_owned())
                .collect(),
        }
    }

    pub(crate) fn sources(&self) -> impl Iterator<Item = &'static str> {
        ALL.iter().map(|(_, src)| *src)
    }

    /// `EVALSHA <sha> <keys> <keys…>`; the caller appends `ARGV`.
    pub(crate) fn call(&self, script: Script, keys: &[&[u8]]) -> Cmd {
        let i = ALL.iter().position(|(s, _)| *s == script).unwrap_or(0);
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(self.shas[i].as_str()).arg(keys.len());
        for k in keys {
            cmd.arg(*k);
        }
        cmd
    }
}
