// The embedded engine through the addon: answers, batches far beyond a leaf's 1024, forget,
// stats, errors, and what a restart (or a killed process) keeps.
'use strict';

const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const test = require('node:test');

const urlseen = require('..');
const { Db, InvalidUrl, InvalidOption, ForgetUnsupported, Locked, Closed, UrlseenError } = urlseen;
const { tmpdir } = require('./helpers.js');

const urls = (n, prefix = 'https://h') => Array.from({ length: n }, (_, i) => `${prefix}${i % 97}.example/p/${i}?q=${i * 7}`);

/** The URLs a batch answered new (recorded). */
const answeredNew = (list, answers) => list.filter((_, i) => answers[i] === false);

test('seen answers new then seen, and merges what the crawler profile merges', () => {
    const ns = new Db().namespace('jobs');
    assert.equal(ns.seen('https://a.example/x'), false);
    assert.equal(ns.seen('https://a.example/x'), true);
    assert.equal(ns.seen('HTTPS://A.EXAMPLE:443/x#top'), true);
    assert.equal(ns.contains('https://a.example/y'), false);
    assert.equal(ns.seen('https://a.example/y'), false);
    assert.equal(ns.size, 2);
    assert.equal(ns.name, 'jobs');
});

test('seenMany answers in order, null for an invalid URL, a repeat is new only once', () => {
    const ns = new Db().namespace('b');
    const out = ns.seenMany(['https://a.example/', '/relative', 'mailto:x@example.com', 'https://a.example', 'https://b.example/']);
    assert.deepEqual(out, [false, null, null, true, false]);
    assert.deepEqual(ns.containsMany(['https://b.example/', 'https://c.example/', 'nope']), [true, false, null]);
    assert.equal(ns.size, 2);
});

test('a batch far larger than 1024: every URL new once (exact), then every one seen', () => {
    const n = 200_000;
    const list = urls(n);
    const exact = new Db().namespace('exact', { capacity: 1000, exact: true });
    const first = exact.seenMany(list);
    assert.equal(first.length, n);
    assert.equal(first.filter((x) => x === false).length, n);
    assert.ok(exact.seenMany(list).every((x) => x === true));
    assert.equal(exact.size, n);

    // Bloom mode: every URL answered new stays seen (a false positive, answered seen, was
    // not recorded), false positives within the bound.
    const bloom = new Db().namespace('bloom', { capacity: 1000, fpr: 0.01 });
    const recorded = answeredNew(list, bloom.seenMany(list));
    assert.ok(recorded.length >= n * 0.98, `${n - recorded.length} false positives in ${n}`);
    assert.ok(bloom.containsMany(recorded).every((x) => x === true));
    assert.ok(bloom.stats().leaves > 1, 'the namespace split past its capacity');
});

test('errors are Error subclasses with a code', () => {
    const db = new Db();
    const ns = db.namespace('e');
    assert.throws(() => ns.seen('/relative'), (e) => e instanceof InvalidUrl && e instanceof UrlseenError && e instanceof Error && e.code === 'URLSEEN_INVALID_URL');
    assert.throws(() => db.namespace('x', { profile: 'nope' }), (e) => e instanceof InvalidOption && e.code === 'URLSEEN_INVALID_OPTION');
    assert.throws(() => db.namespace('x', { capacity: 0 }), InvalidOption);
    assert.throws(() => db.namespace('x', { fpr: 2 }), InvalidOption);
    assert.throws(() => new Db(null, { fsync: 'sometimes' }), InvalidOption);
    assert.throws(() => ns.forget('https://a.example/'), (e) => e instanceof ForgetUnsupported && e.code === 'URLSEEN_FORGET_UNSUPPORTED');
    assert.throws(() => ns.forgetPrefix('https://a.example/'), ForgetUnsupported);
    db.close();
    assert.equal(db.closed, true);
    assert.throws(() => ns.seen('https://a.example/'), (e) => e instanceof Closed && e.code === 'URLSEEN_CLOSED');
    db.close(); // twice: nothing
});

test('forget, forgetMany, forgetHost and forgetPrefix make URLs new again, and only those', (t) => {
    const counting = new Db().namespace('c', { counting: true });
    counting.seenMany(['https://a.example/1', 'https://a.example/2', 'https://b.example/1']);
    assert.equal(counting.forget('https://a.example/1'), true);
    assert.equal(counting.forget('https://a.example/1'), false);
    assert.deepEqual(counting.forgetMany(['https://a.example/2', 'https://c.example/', 'bad']), [true, false, null]);
    assert.deepEqual(counting.containsMany(['https://a.example/1', 'https://a.example/2', 'https://b.example/1']), [false, false, true]);

    const db = new Db();
    const ns = db.namespace('h');
    ns.seenMany([...urls(3000, 'https://a'), 'https://keep.example/x']);
    const aHost = urls(3000, 'https://a').filter((u) => u.startsWith('https://a5.example/'));
    assert.equal(ns.forgetHost('a5.example'), aHost.length);
    assert.ok(ns.containsMany(aHost).every((x) => x === false));
    assert.equal(ns.contains('https://keep.example/x'), true);
    assert.equal(ns.contains('https://a6.example/p/6?q=42'), true);
    assert.throws(() => ns.forgetHost('https://a5.example/'), InvalidUrl);

    const kept = new Db(tmpdir(t)).namespace('k', { keepUrls: true });
    kept.seenMany(['https://a.example/blog/1', 'https://a.example/blog/2', 'https://a.example/shop/1']);
    assert.equal(kept.forgetPrefix('https://a.example/blog/'), 2);
    assert.deepEqual(kept.containsMany(['https://a.example/blog/1', 'https://a.example/shop/1']), [false, true]);
});

test('stats has URL.INFO fields and counts', () => {
    const ns = new Db().namespace('s', { capacity: 5000, fpr: 0.001, profile: 'w3lib' });
    ns.seenMany(urls(1234));
    const s = ns.stats();
    assert.equal(s.name, 's');
    assert.equal(s.count, 1234);
    assert.equal(s.capacity, 5000);
    assert.equal(s.fpr_bound, 0.001);
    assert.equal(s.profile, 'w3lib');
    assert.equal(s.persistence, null);
    assert.ok(s.memory_bytes > 0);
});

test('lifetimes and recrawl windows', () => {
    const db = new Db();
    const ns = db.namespace('t', { ttl: 100 });
    assert.ok(ns.ttl() > 98 && ns.ttl() <= 100);
    assert.equal(ns.persist(), true);
    assert.equal(db.ttl('t'), -1);
    assert.equal(db.ttl('missing'), -2);
    assert.equal(db.expire('t', 0), true);
    assert.deepEqual(db.names(), []);
    const r = db.namespace('r', { recrawlAfter: 3600, generations: 4 });
    assert.equal(r.seen('https://a.example/'), false);
    assert.equal(r.seen('https://a.example/'), true);
    assert.equal(Number(r.stats().recrawl_after), 3600);
    assert.throws(() => db.namespace('bad', { recrawlAfter: -1 }), InvalidOption);
    assert.equal(db.drop('r'), true);
    assert.equal(db.drop('r'), false);
});

test('a restart keeps every URL seen; a second Db on the directory is Locked', (t) => {
    const dir = tmpdir(t);
    const list = urls(50_000);
    const db = new Db(dir, { fsync: 'everysec' });
    assert.equal(db.path, dir);
    assert.equal(db.fsync, 'everysec');
    const recorded = answeredNew(list, db.namespace('n', { capacity: 1000 }).seenMany(list));
    assert.ok(recorded.length > 49_000);
    assert.throws(() => new Db(dir), (e) => e instanceof Locked && e.code === 'URLSEEN_LOCKED');
    db.close();
    const again = new Db(dir);
    assert.ok(again.namespace('n').containsMany(recorded).every((x) => x === true));
    assert.deepEqual(again.names(), ['n']);
    again.close();
});

test('a killed process loses nothing it was answered', (t) => {
    const dir = tmpdir(t);
    const n = 30_000;
    const script = `
        const { Db } = require(${JSON.stringify(path.join(__dirname, '..'))});
        const ns = new Db(${JSON.stringify(dir)}).namespace('k', { capacity: 1000 });
        const list = Array.from({ length: ${n} }, (_, i) => 'https://k' + (i % 13) + '.example/' + i);
        const answers = ns.seenMany(list);
        require('node:fs').writeFileSync(${JSON.stringify(path.join(dir, 'answered.json'))}, JSON.stringify(list.filter((_, i) => answers[i] === false)));
        process.kill(process.pid, 'SIGKILL');
    `;
    const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
    assert.equal(run.signal, 'SIGKILL');
    const recorded = JSON.parse(fs.readFileSync(path.join(dir, 'answered.json'), 'utf8'));
    assert.ok(recorded.length > n * 0.98);
    const db = new Db(dir);
    assert.ok(db.namespace('k').containsMany(recorded).every((x) => x === true));
    db.close();
});
