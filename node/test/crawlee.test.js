// Crawls of a generated local site (site.js) with Crawlee's CheerioCrawler, each in a child
// process (crawl.js): with Crawlee's own deduplication, and with urlseen embedded and through
// `urlseen serve`. Same pages fetched, none twice; a crawl killed and resumed fetches nothing
// again; two processes sharing one server never fetch the same page.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const test = require('node:test');

const { Request } = require('@crawlee/core');
const { Db } = require('..');
const { Client } = require('../client.js');
const { Site } = require('./site.js');
const { tmpdir, startServer, startCrawl } = require('./helpers.js');

const PAGES = 500;

/** Crawlee's unique key of each fetched path. */
function keys(site, paths) {
    return paths.map((p) => new Request({ url: site.origin + p }).uniqueKey);
}

function assertNoneTwice(list, what) {
    const dup = list.filter((k, i) => list.indexOf(k) !== i);
    assert.equal(dup.length, 0, `${what} fetched twice: ${dup.slice(0, 5).join(', ')}`);
}

const sorted = (xs) => [...new Set(xs)].sort();

let site;
let baseline; // the unique keys Crawlee's own deduplication fetches

test.before(async () => {
    site = await new Site(PAGES).start();
});
test.after(async () => {
    await site?.close();
});

test("Crawlee's own deduplication: the baseline", async (t) => {
    const report = await startCrawl({ start: site.url, storage: tmpdir(t), mode: 'crawlee' }).done;
    const fetched = keys(site, site.take());
    assertNoneTwice(fetched, 'Crawlee');
    assert.equal(report.failed, 0);
    assert.equal(report.handled, fetched.length);
    assert.ok(fetched.length > 2 * PAGES, `only ${fetched.length} pages fetched`);
    baseline = sorted(fetched);
});

test('urlseen embedded: the same pages, none twice, and the queue keeps none handled', async (t) => {
    assert.ok(baseline, 'the baseline crawl ran');
    const dir = tmpdir(t);
    const report = await startCrawl({ start: site.url, storage: path.join(dir, 'storage'), mode: 'embedded', path: path.join(dir, 'urlseen') }).done;
    const fetched = keys(site, site.take());
    assertNoneTwice(fetched, 'urlseen embedded');
    assert.equal(report.failed, 0);
    assert.deepEqual(sorted(fetched), baseline);
    // What urlseen recorded: every unique key the crawl met, fetched or not.
    const db = new Db(path.join(dir, 'urlseen'));
    const ns = db.namespace('crawlee:default');
    assert.ok(ns.containsMany(baseline).every((x) => x === true));
    db.close();
});

test('urlseen through urlseen serve: the same pages, none twice', async (t) => {
    assert.ok(baseline, 'the baseline crawl ran');
    const dir = tmpdir(t);
    const server = await startServer(dir);
    try {
        const report = await startCrawl({ start: site.url, storage: path.join(dir, 'storage'), mode: 'server', server: server.url }).done;
        const fetched = keys(site, site.take());
        assertNoneTwice(fetched, 'urlseen serve');
        assert.equal(report.failed, 0);
        assert.deepEqual(sorted(fetched), baseline);
        // Sized as an embedded namespace is, not with the server's small default, whose early
        // leaves answered a few new requests "seen" (never fetched) in every crawl.
        const client = await Client.connect(server.url);
        try {
            assert.equal((await (await client.namespace('crawlee:default')).stats()).capacity, 1_000_000);
        } finally {
            client.close();
        }
    } finally {
        assert.equal(await server.stop(), 0);
    }
});

test("key 'url' with the crawler profile: every page, no canonical URL fetched twice, fewer fetches", async (t) => {
    assert.ok(baseline, 'the baseline crawl ran');
    const dir = tmpdir(t);
    await startCrawl({ start: site.url, storage: path.join(dir, 'storage'), mode: 'embedded', path: path.join(dir, 'urlseen'), key: 'url' }).done;
    const fetched = site.take().map((p) => site.origin + p);
    const check = new Db().namespace('check', { exact: true, profile: 'crawler' });
    assert.ok(check.seenMany(fetched).every((x) => x === false), 'a canonical URL was fetched twice');
    assert.ok(fetched.length < baseline.length, `${fetched.length} fetches, Crawlee's own ${baseline.length}`);
    const page = (u) => decodeURIComponent(new URL(u).pathname);
    assert.deepEqual(sorted(fetched.map(page)), sorted(baseline.map(page)));
});

test('a crawl killed and resumed fetches nothing again, and every page once', async (t) => {
    assert.ok(baseline, 'the baseline crawl ran');
    const dir = tmpdir(t);
    const opts = { start: site.url, storage: path.join(dir, 'storage'), mode: 'embedded', path: path.join(dir, 'urlseen'), persist: true };
    const first = startCrawl(opts);
    // Stop answering part-way; once the pages answered are handled, kill the crawler.
    while (site.requests.length < baseline.length / 3) await new Promise((r) => setTimeout(r, 20));
    site.hold();
    await new Promise((r) => setTimeout(r, 2000));
    first.child.kill('SIGKILL');
    await assert.rejects(first.done, (e) => e.signal === 'SIGKILL');
    site.release();
    const before = keys(site, site.take());
    assert.ok(before.length < baseline.length);

    const report = await startCrawl({ ...opts, purge: false }).done;
    const after = keys(site, site.take());
    assert.equal(report.failed, 0);
    const again = after.filter((k) => before.includes(k));
    assert.deepEqual(again, [], 'fetched again after the resume');
    assertNoneTwice([...before, ...after], 'the two runs');
    assert.deepEqual(sorted([...before, ...after]), baseline);
});

test('two crawler processes sharing one urlseen serve never fetch the same page', async (t) => {
    assert.ok(baseline, 'the baseline crawl ran');
    const dir = tmpdir(t);
    const server = await startServer(dir);
    try {
        // The second starts on a page of its own (a key only it adds), so both have work.
        const second = `${site.origin}/p/${PAGES / 2}.html?from=second`;
        const runs = [
            startCrawl({ start: site.url, storage: path.join(dir, 'a'), mode: 'server', server: server.url }),
            startCrawl({ start: second, storage: path.join(dir, 'b'), mode: 'server', server: server.url }),
        ];
        const [a, b] = await Promise.all(runs.map((r) => r.done));
        const fetched = keys(site, site.take());
        assertNoneTwice(fetched, 'the two processes');
        assert.equal(a.failed + b.failed, 0);
        assert.ok(a.handled > 0 && b.handled > 0, `handled ${a.handled} and ${b.handled}`);
        assert.equal(a.handled + b.handled, fetched.length);
        const secondKey = new Request({ url: second }).uniqueKey;
        assert.deepEqual(sorted(fetched.filter((k) => k !== secondKey)), baseline);
    } finally {
        assert.equal(await server.stop(), 0);
    }
});

/** Crawlee's memory storage in a directory of its own, persisting nothing. */
const local = (dir, name) => ({ localDataDirectory: path.join(dir, name), persistStorage: false });

/** A queue of `storage` (Crawlee's RequestQueue over urlseen's client). */
async function openQueue(storage, name) {
    const { RequestQueue, Configuration } = require('@crawlee/core');
    const config = new Configuration({ persistStorage: false, purgeOnStart: false });
    return RequestQueue.open(name, { storageClient: storage, config });
}

test('an add stopped between queueing and recording loses no request, embedded and through a server', async (t) => {
    const { urlseenStorage } = require('../crawlee.js');
    const dir = tmpdir(t);
    const server = await startServer(dir);
    try {
        for (const where of [{ path: path.join(dir, 'seen') }, { server: server.url }]) {
            const storage = urlseenStorage({ ...where, storageOptions: local(dir, where.server ? 'b' : 'a') });
            const queue = await openQueue(storage, 'stopped');
            const ns = await storage.seenSet(queue.client);
            const record = ns.seenMany;
            // Stands for a process killed after the queue took the requests.
            ns.seenMany = () => Promise.reject(new Error('killed'));
            const urls = Array.from({ length: 20 }, (_, i) => `http://a.example/${i}`);
            await assert.rejects(queue.addRequests(urls.map((url) => ({ url }))), /killed/);
            ns.seenMany = record;
            const fetched = [];
            for (let r = await queue.fetchNextRequest(); r; r = await queue.fetchNextRequest()) {
                fetched.push(r.url);
                await queue.markRequestHandled(r);
            }
            assert.deepEqual(sorted(fetched), sorted(urls), JSON.stringify(where));
            await storage.close();
        }
    } finally {
        assert.equal(await server.stop(), 0);
    }
});

test('a request another process recorded first is answered present and not fetched here', async (t) => {
    const { urlseenStorage } = require('../crawlee.js');
    const dir = tmpdir(t);
    const server = await startServer(dir);
    try {
        const mine = urlseenStorage({ server: server.url, storageOptions: local(dir, 'mine') });
        const other = urlseenStorage({ server: server.url, storageOptions: local(dir, 'other') });
        const [queue, otherQueue] = [await openQueue(mine, 'race'), await openQueue(other, 'race')];
        const ns = await mine.seenSet(queue.client);
        const record = ns.seenMany.bind(ns);
        let otherAnswer;
        // Between this process's lookup and its record, the other adds the same URL.
        ns.seenMany = async (keys) => {
            otherAnswer = await otherQueue.addRequest({ url: 'http://a.example/race' });
            return record(keys);
        };
        const answer = await queue.addRequest({ url: 'http://a.example/race' });
        assert.equal(otherAnswer.wasAlreadyPresent, false, 'the other process queued it first');
        assert.equal(answer.wasAlreadyPresent, true);
        assert.equal(await queue.fetchNextRequest(), null);
        assert.equal(await queue.isFinished(), true);
        assert.equal((await otherQueue.fetchNextRequest())?.url, 'http://a.example/race');
        await mine.close();
        await other.close();
    } finally {
        assert.equal(await server.stop(), 0);
    }
});

test('a recrawl window and forget by host through the Crawlee storage, embedded and through a server', async (t) => {
    const { urlseenStorage } = require('../crawlee.js');
    const dir = tmpdir(t);
    const server = await startServer(dir);
    try {
        const homes = [{ path: path.join(dir, 'seen') }, { server: server.url }];
        for (const [i, where] of homes.entries()) {
            const storage = urlseenStorage({ ...where, recrawlAfter: 86400, storageOptions: local(dir, `w${i}`) });
            const queue = await openQueue(storage, 'window');
            const reqs = [{ url: 'http://a.example/1' }, { url: 'http://b.example/1' }].map((r) => new Request(r));
            await queue.addRequests(reqs);
            for (let r = await queue.fetchNextRequest(); r; r = await queue.fetchNextRequest()) {
                await queue.markRequestHandled(r);
            }
            // The queue client itself: Crawlee's RequestQueue answers a key it cached without it.
            const present = async () =>
                (await queue.client.batchAddRequests(reqs)).processedRequests.map((p) => [p.uniqueKey, p.wasAlreadyPresent, p.wasAlreadyHandled]).sort();
            assert.deepEqual(await present(), [['http://a.example/1', true, true], ['http://b.example/1', true, true]], JSON.stringify(where));
            assert.equal(Number((await queue.client.seenStats()).recrawl_after), 86400);
            assert.equal(await queue.client.forgetHost('a.example'), 1);
            assert.deepEqual(await present(), [['http://a.example/1', false, false], ['http://b.example/1', true, true]], JSON.stringify(where));
            await storage.close();
        }
    } finally {
        assert.equal(await server.stop(), 0);
    }
});

test('a request recorded handled before a kill that left it in the queue is finished unfetched', async (t) => {
    const { urlseenStorage } = require('../crawlee.js');
    const dir = tmpdir(t);
    const storage = urlseenStorage({ path: path.join(dir, 'seen'), storageOptions: local(dir, 'q') });
    const queue = await openQueue(storage, 'killed');
    const answer = await queue.addRequest({ url: 'http://a.example/done' });
    assert.equal(answer.wasAlreadyPresent, false);
    // What a kill between urlseen's record of the handling and the queue's own mark leaves.
    const handled = await storage.seenSet(queue.client, 'handled');
    handled.seenMany(['http://a.example/done']);
    assert.equal(await queue.fetchNextRequest(), null);
    assert.equal(await queue.isFinished(), true);
    const again = await queue.client.batchAddRequests([new Request({ url: 'http://a.example/done' })]);
    assert.deepEqual(again.processedRequests.map((p) => [p.wasAlreadyPresent, p.wasAlreadyHandled]), [[true, true]]);
    await storage.close();
});
