//! The Lua scripts: every write to a leaf is one of these, atomic on the leaf's hash slot.
//!
//! Scripts run with `EVALSHA`; a node that answers `NOSCRIPT` (restarted, flushed) gets
//! `SCRIPT LOAD` of all of them and the command is sent again (it did not run). Every key a
//! script touches is passed in `KEYS` and shares one hash tag, so each runs in one slot.

use ::redis::Cmd;

/// The Lua a script that creates (or `SET`s, which clears a key's time) keys of a node starts
/// with: `stamp(id, k…)` gives keys `k…` the node's lifetime, the time its identity hash `id`
/// holds in field `expire_at` (Unix ms; absent or 0: none). So a key made by any client, in
/// any split, after an `EXPIRE` gets the namespace's time in the same atomic step that makes
/// it (see `lifetime.rs`).
macro_rules! stamp_prelude {
    () => {
        r"
local function stamp(id, ...)
  local at = redis.call('HGET', id, 'expire_at')
  if at and at ~= '0' then
    for _, k in ipairs({...}) do redis.call('PEXPIREAT', k, at) end
  end
end
"
    };
}

/// Check-and-insert of a batch of candidate fingerprints into one leaf.
///
/// `KEYS`: log, state, identity, hosts. `ARGV`: the entries the caller's replica covers, the
/// candidates (8-byte little-endian fingerprints, distinct, none of them in the caller's
/// replica), the most entries it may send back, the last entry the replica covers (empty when
/// it covers none), the namespace's epoch, and the candidates' host hashes (4 bytes
/// little-endian each, 0 for unknown, in the candidates' order). The host hashes of the
/// entries appended are appended to the hosts string, which stays parallel to the log (entry
/// `i`'s host at bytes `4i..4i+4`) as long as it was before: a leaf written by a build that
/// kept no hosts has a shorter hosts string, which stays shorter (its hosts are unknown, and
/// a forget by host refuses there). Replies:
/// - `{0, len, flags, delta}`: done. `len` was the log's length before the append; `delta` holds
///   the entries between the caller's replica and `len`; `flags` has one byte per candidate,
///   `'1'` if the candidate is among those entries (seen), `'0'` if it was appended (new), or is
///   empty when every candidate was new.
/// - `{1, state}`: the leaf is frozen (`F`, splitting) or retired (`I`): nothing was written.
/// - `{2, len}`: the caller is more than the limit behind: sync first; nothing was written.
/// - `{3, len, recorded}`: the log is not the one the caller's replica copies, or is shorter
///   than the count its identity recorded: it has fewer entries than the replica covers or
///   than were appended (deleted, evicted, re-created), or another entry where the replica's
///   last one was (Redis lost entries, and others were appended since); nothing was written.
/// - `{4}`: the leaf has no identity: never claimed, or its keys were lost (the caller asks
///   the metadata which); nothing was written.
/// - `{5, epoch}`: the leaf belongs to another incarnation of the namespace; nothing written.
///
/// The identity hash (`epoch`, `len`) costs one `HMGET` and, when something is appended, one
/// `HSET` per call: the check that makes a wiped or re-created leaf visible to every client,
/// also to one that has read nothing of it. The first append creates the log (and hosts):
/// they get the leaf's lifetime then (later appends keep a key's time).
const INSERT: &str = concat!(
    stamp_prelude!(),
    r"
local st = redis.call('GET', KEYS[2])
if st then return {1, st} end
local ident = redis.call('HMGET', KEYS[3], 'epoch', 'len')
if not ident[1] then return {4} end
if ident[1] ~= ARGV[5] then return {5, ident[1]} end
local bytes = redis.call('STRLEN', KEYS[1])
if bytes % 8 ~= 0 then return redis.error_reply('ERR urlseen: log length is not a multiple of 8') end
local len = bytes / 8
local recorded = tonumber(ident[2]) or 0
local synced = tonumber(ARGV[1])
if synced > len or recorded > len then return {3, len, recorded} end
if synced > 0 and #ARGV[4] == 8
  and redis.call('GETRANGE', KEYS[1], (synced - 1) * 8, synced * 8 - 1) ~= ARGV[4] then
  return {3, len, recorded}
end
if len - synced > tonumber(ARGV[3]) then return {2, len} end
local cands = ARGV[2]
local hosts = ARGV[6] or ''
local aligned = #hosts * 2 == #cands and redis.call('STRLEN', KEYS[4]) == len * 4
if len == synced then
  if #cands > 0 then
    redis.call('APPEND', KEYS[1], cands)
    if aligned then redis.call('APPEND', KEYS[4], hosts) end
    redis.call('HSET', KEYS[3], 'len', len + #cands / 8)
    if bytes == 0 then stamp(KEYS[3], KEYS[1], KEYS[4]) end
  end
  return {0, len, '', ''}
end
local delta = redis.call('GETRANGE', KEYS[1], synced * 8, len * 8 - 1)
local known = {}
for i = 1, #delta, 8 do known[string.sub(delta, i, i + 7)] = true end
local flags = {}
local fresh = {}
local fresh_hosts = {}
for i = 1, #cands, 8 do
  local fp = string.sub(cands, i, i + 7)
  if known[fp] then
    flags[#flags + 1] = '1'
  else
    flags[#flags + 1] = '0'
    fresh[#fresh + 1] = fp
    if aligned then
      local at = (i - 1) / 2 + 1
      fresh_hosts[#fresh_hosts + 1] = string.sub(hosts, at, at + 3)
    end
  end
end
if #fresh > 0 then
  redis.call('APPEND', KEYS[1], table.concat(fresh))
  if aligned then redis.call('APPEND', KEYS[4], table.concat(fresh_hosts)) end
  redis.call('HSET', KEYS[3], 'len', len + #fresh)
end
return {0, len, table.concat(flags), delta}
",
);

/// Reads a leaf's state and a range of its log, atomically.
///
/// `KEYS`: log, state, identity. `ARGV`: first entry, most entries, the entry expected just
/// before the first (empty: no check), and the namespace's epoch. Reply: `{state or '', len,
/// bytes, code}`; `code` 0 is a read; 1: the log holds another entry there, or fewer than its
/// identity recorded (it lost entries: the caller must refuse; a fifth element holds that
/// count); 4: the leaf has no identity
/// (never claimed, or lost: the caller asks the metadata); 5: the leaf belongs to another
/// incarnation of the namespace, whose epoch is in place of the bytes. Only code 0 carries
/// entries.
const SYNC: &str = r"
local st = redis.call('GET', KEYS[2]) or ''
local ident = redis.call('HMGET', KEYS[3], 'epoch', 'len')
if not ident[1] then return {st, 0, '', 4} end
if ident[1] ~= ARGV[4] then return {st, 0, ident[1], 5} end
local bytes = redis.call('STRLEN', KEYS[1])
if bytes % 8 ~= 0 then return redis.error_reply('ERR urlseen: log length is not a multiple of 8') end
local len = bytes / 8
local recorded = tonumber(ident[2]) or 0
if st ~= 'I' and recorded > len then return {st, len, '', 1, recorded} end
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

/// Gives a leaf its identity (the namespace's epoch and the log's length), unless it has one.
///
/// `KEYS`: identity, log, state. `ARGV`: epoch, the entries the caller knows the log held.
/// Reply: `{1}` claimed (or already ours), `{0, epoch}` another incarnation's, `{-1, len,
/// known}` the log is shorter than the caller or its count knew (lost entries). A retired
/// leaf's log is deleted on purpose, and not counted.
const CLAIM_LEAF: &str = r"
local e = redis.call('HGET', KEYS[1], 'epoch')
if e then
  if e == ARGV[1] then return {1} end
  return {0, e}
end
local len = redis.call('STRLEN', KEYS[2]) / 8
local known = math.max(tonumber(ARGV[2]), tonumber(redis.call('HGET', KEYS[1], 'len') or '0'))
if redis.call('GET', KEYS[3]) ~= 'I' and len < known then return {-1, len, known} end
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'len', len)
return {1}
";

/// Checks (`ARGV[3]` = 0) or records (1) in the metadata that leaf `ARGV[2]` was claimed, for
/// incarnation `ARGV[1]`. `KEYS`: meta. Reply: `{0}` fine, `{1}` no metadata, `{2, epoch}`
/// another incarnation, `{3}` (check only) the leaf was claimed before: its identity is lost.
const CLAIM_META: &str = r"
local e = redis.call('HGET', KEYS[1], 'epoch')
if not e then return {1} end
if e ~= ARGV[1] then return {2, e} end
local f = 'e' .. ARGV[2]
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], f, '1')
  return {0}
end
if redis.call('HEXISTS', KEYS[1], f) == 1 then return {3} end
return {0}
";

/// Freezes a leaf (idempotent). `KEYS`: state, log, identity. Reply: `{state, len}`.
const FREEZE: &str = concat!(
    stamp_prelude!(),
    r"
local st = redis.call('GET', KEYS[1])
if not st then
  redis.call('SET', KEYS[1], 'F')
  stamp(KEYS[3], KEYS[1])
  st = 'F'
end
return {st, redis.call('STRLEN', KEYS[2]) / 8}
",
);

/// Appends one chunk of a splitting parent's log (the part that routes to this child) to the
/// child, exactly once: the child's cursor records the parent-log offset it has received up to.
///
/// `KEYS`: child log, child cursor, child state, child identity, child hosts. `ARGV`: chunk
/// start, chunk end (parent-log entries), fingerprints, and their host hashes (4 bytes each;
/// empty when the parent's hosts are unknown, which leaves the child's hosts string short: its
/// hosts are unknown from then on). The child's identity counts the entries too. Reply: 1
/// appended, 0 already there, -1 out of order, -2 the child is itself frozen (never, by the
/// protocol). Every key it writes gets the child's lifetime (the cursor's `SET` clears a time).
const MIGRATE: &str = concat!(
    stamp_prelude!(),
    r"
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local s = tonumber(ARGV[1])
local e = tonumber(ARGV[2])
if cur >= e then return 0 end
if cur ~= s then return -1 end
if redis.call('EXISTS', KEYS[3]) == 1 then return -2 end
if #ARGV[3] > 0 then
  local hosts = ARGV[4] or ''
  if #hosts * 2 == #ARGV[3]
    and redis.call('STRLEN', KEYS[5]) * 2 == redis.call('STRLEN', KEYS[1]) then
    redis.call('APPEND', KEYS[5], hosts)
  end
  redis.call('APPEND', KEYS[1], ARGV[3])
  redis.call('HINCRBY', KEYS[4], 'len', #ARGV[3] / 8)
end
redis.call('SET', KEYS[2], ARGV[2])
stamp(KEYS[4], KEYS[1], KEYS[2], KEYS[4], KEYS[5])
return 1
",
);

/// Creates a namespace's metadata unless it exists. `KEYS`: meta. `ARGV`: params, initial
/// leaves, a new epoch (the incarnation's identity; kept if the namespace has one), the
/// metadata format (see `meta.rs`). Reply:
/// `{stored params, stored epoch}` (the caller compares the params with its own, and keeps the
/// epoch for every later call).
const CREATE: &str = r"
local p = redis.call('HGET', KEYS[1], 'params')
if p then
  redis.call('HSETNX', KEYS[1], 'epoch', ARGV[3])
  return {p, redis.call('HGET', KEYS[1], 'epoch')}
end
local c = tonumber(ARGV[2])
local kids = {}
for i = 1, c do
  kids[i] = tostring(i)
  redis.call('HSET', KEYS[1], 'n' .. i, 'L1')
end
redis.call('HSET', KEYS[1], 'format', ARGV[4], 'params', ARGV[1], 'version', '1', 'epoch', ARGV[3],
  'next', tostring(c + 1), 'n0', 'I0:' .. table.concat(kids, ','))
return {ARGV[1], ARGV[3]}
";

/// Marks leaf `ARGV[1]` splitting with `ARGV[2]` new children (idempotent: a node already
/// splitting or inner is returned as it is). `KEYS`: meta. `ARGV[3]`, if given: the host hash
/// (8 hex digits) whose entries the split drops, a forget by host (field `f<id>`, read by every
/// worker that migrates the node). Reply: the node's record.
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
if ARGV[3] then redis.call('HSET', KEYS[1], 'f' .. ARGV[1], ARGV[3]) end
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
/// `KEYS`: state, log, the parent's own migration cursor, its hosts, its identity (whose
/// lifetime the state keeps: `SET` clears a key's time).
const RETIRE: &str = concat!(
    stamp_prelude!(),
    r"
redis.call('SET', KEYS[1], 'I')
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
stamp(KEYS[5], KEYS[1])
return 1
",
);

/// Reads a leaf's state, log length and hosts string, atomically. `KEYS`: state, log, hosts.
/// Reply: `{state or '', len, hosts}`.
const HOSTS: &str = r"
local st = redis.call('GET', KEYS[1]) or ''
local bytes = redis.call('STRLEN', KEYS[2])
return {st, math.floor(bytes / 8), redis.call('GET', KEYS[3]) or ''}
";

/// Lists hosts in the namespace's host dictionary (the collision guard of a forget by host):
/// field = host hash (8 hex digits), value = the hosts recorded under it, one per line.
/// `KEYS`: dictionary, metadata (same hash tag). `ARGV`: the namespace's epoch, then hash,
/// host, hash, host, … Reply: `{0}` listed; `{1}` no metadata, `{2, epoch}` another
/// incarnation: nothing written (a wiped namespace is not re-created by a dictionary). A
/// dictionary made here gets the namespace's lifetime (the metadata's `expire_at`).
const NOTE_HOSTS: &str = r"
local e = redis.call('HGET', KEYS[2], 'epoch')
if not e then return {1} end
if e ~= ARGV[1] then return {2, e} end
for i = 2, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if not cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  else
    local found = false
    for h in string.gmatch(cur, '[^\n]+') do
      if h == ARGV[i + 1] then found = true end
    end
    if not found then redis.call('HSET', KEYS[1], ARGV[i], cur .. '\n' .. ARGV[i + 1]) end
  end
end
local at = redis.call('HGET', KEYS[2], 'expire_at')
if at and at ~= '0' then redis.call('PEXPIREAT', KEYS[1], at) end
return {0}
";

/// Sets (or removes) a namespace's lifetime in its metadata, if nobody changed it since the
/// caller read it: the one place a lifetime is decided (`lifetime.rs`).
///
/// `KEYS`: meta, host dictionary, window decision (the keys of the metadata's slot), and the
/// incarnation's end marker (`urlseen:{ns}:ended:<epoch>`). `ARGV`: the lifetime's sequence
/// number the caller read (field `expire_seq`, 0 if none), the new time (Unix ms; 0: none),
/// the epoch the caller read, when (Unix ms) the end marker expires. Times are decimal
/// strings, passed to Redis as they are (a Lua number would round those past 2^53). Reply:
/// `{0}` no metadata; `{1, seq}` changed meanwhile (nothing written; the caller reads
/// again); `{2, seq, next}` done: the lifetime's new sequence number and the node ids
/// allocated so far (`1..next`), whose keys the caller stamps next. The version is bumped, so
/// every client's metadata poll reads the new time. A time not in the future deletes the
/// three keys now (Redis's own rule), which ends the namespace for every client.
///
/// The end marker (the time, as a string) is the one key that outlives the namespace, by
/// a grace period: a client that held the namespace open, idle, while another gave it a lifetime
/// that then ended, finds the metadata gone and tells an expiry from lost data by it.
const SET_EXPIRY: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
local seq = tonumber(redis.call('HGET', KEYS[1], 'expire_seq') or '0') or 0
if seq ~= tonumber(ARGV[1]) then return {1, seq} end
if (redis.call('HGET', KEYS[1], 'epoch') or '') ~= ARGV[3] then return {1, seq} end
seq = seq + 1
local nxt = tonumber(redis.call('HGET', KEYS[1], 'next') or '1') or 1
redis.call('HSET', KEYS[1], 'expire_at', ARGV[2], 'expire_seq', seq)
redis.call('HINCRBY', KEYS[1], 'version', 1)
local at = ARGV[2]
for i = 1, 3 do
  if at ~= '0' then redis.call('PEXPIREAT', KEYS[i], at) else redis.call('PERSIST', KEYS[i]) end
end
if at ~= '0' then
  redis.call('SET', KEYS[4], at, 'PXAT', ARGV[4])
else
  redis.call('DEL', KEYS[4])
end
return {2, seq, nxt}
";

/// Gives a node's keys the namespace's lifetime `ARGV[2]` (Unix ms; 0: none), number
/// `ARGV[1]`, unless the node holds that one or a newer one already. The time is kept in the
/// identity hash (made here if the node has no keys yet), where every script that makes a key
/// of the node reads it (`stamp`): so whichever of this and a key's creation runs first, the
/// key ends with the newest time. The split lock keeps its own, short, expiry, only shortened
/// to the namespace's.
///
/// `KEYS`: identity, log, state, cursor, hosts, lock. Reply: 1 stamped, 0 already newer.
const STAMP_NODE: &str = r"
local cur = tonumber(redis.call('HGET', KEYS[1], 'expire_seq') or '0') or 0
if cur >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'expire_at', ARGV[2], 'expire_seq', ARGV[1])
local at = ARGV[2]
for i = 1, 5 do
  if at ~= '0' then redis.call('PEXPIREAT', KEYS[i], at) else redis.call('PERSIST', KEYS[i]) end
end
if at ~= '0' then redis.call('PEXPIREAT', KEYS[6], at, 'LT') end
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
    ClaimLeaf,
    ClaimMeta,
    Freeze,
    Migrate,
    Create,
    MarkSplitting,
    MarkInner,
    Retire,
    Unlock,
    Extend,
    Hosts,
    NoteHosts,
    SetExpiry,
    StampNode,
}

const ALL: [(Script, &str); 16] = [
    (Script::Insert, INSERT),
    (Script::Sync, SYNC),
    (Script::ClaimLeaf, CLAIM_LEAF),
    (Script::ClaimMeta, CLAIM_META),
    (Script::Freeze, FREEZE),
    (Script::Migrate, MIGRATE),
    (Script::Create, CREATE),
    (Script::MarkSplitting, MARK_SPLITTING),
    (Script::MarkInner, MARK_INNER),
    (Script::Retire, RETIRE),
    (Script::Unlock, UNLOCK),
    (Script::Extend, EXTEND),
    (Script::Hosts, HOSTS),
    (Script::NoteHosts, NOTE_HOSTS),
    (Script::SetExpiry, SET_EXPIRY),
    (Script::StampNode, STAMP_NODE),
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
