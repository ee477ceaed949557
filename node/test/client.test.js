// The client of `urlseen serve` (the package's own bin): the embedded engine's answers over
// RESP, pipelined batches, stats, errors, and a server restart on a data directory.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const test = require('node:test');

const { Db, Client, ConnectionFailed, ForgetUnsupported, InvalidUrl, InvalidOption, Closed } = require('..');
const { tmpdir, startServer, freePort } = require('./helpers.js');

const urls = (n) => Array.from({ length: n }, (_, i) => `https://r${i % 31}.example/a/${i}`);

test('the client answers what the embedded engine answers, batches pipelined far past 1024', async (t) => {
    const server = await startServer(tmpdir(t));
    const client = await Client.connect(server.url);
    try {
        const remote = await client.namespace('jobs', { capacity: 1000, exact: true });
        const local = new Db().namespace('jobs', { capacity: 1000, exact: true });
        const mixed = ['https://a.example/', '/relative', 'HTTPS://A.EXAMPLE:443/#x', 'mailto:a@b.c', 'https://b.example/?b=2&a=1'];
        assert.deepEqual(await remote.seenMany(mixed), local.seenMany(mixed));
        assert.equal(await remote.seen('https://a.example/'), true);
        assert.equal(await remote.contains('https://z.example/'), false);
        await assert.rejects(remote.seen('/relative'), (e) => e instanceof InvalidUrl && e.code === 'URLSEEN_INVALID_URL');

        const list = urls(100_000);
        const first = await remote.seenMany(list);
        assert.equal(first.length, list.length);
        assert.equal(first.filter((x) => x === false).length, list.length);
        assert.ok((await remote.seenMany(list)).every((x) => x === true));
        assert.ok((await remote.containsMany(list)).every((x) => x === true));
        assert.equal(await remote.size(), list.length + 2);

        local.seenMany(list);
        const [a, b] = [local.stats(), await remote.stats()];
        assert.deepEqual(Object.keys(b).sort(), Object.keys(a).sort());
        for (const k of ['count', 'capacity', 'fpr_bound', 'profile', 'exact', 'counting']) assert.deepEqual(b[k], a[k], k);
    } finally {
        client.close();
        assert.equal(await server.stop(), 0);
    }
});

test('forget, forget by host, lifetimes and names over the server', async (t) => {
    const server = await startServer(tmpdir(t));
    const client = await Client.connect(server.url);
    try {
        const plain = await client.namespace('plain');
        await plain.seenMany(urls(2000));
        await assert.rejects(plain.forget('https://r1.example/a/1'), (e) => e instanceof ForgetUnsupported);
        const host = urls(2000).filter((u) => u.startsWith('https://r3.example/'));
        assert.equal(await plain.forgetHost('r3.example'), host.length);
        assert.ok((await plain.containsMany(host)).every((x) => x === false));
        assert.equal(await plain.contains('https://r4.example/a/4'), true);

        const counted = await client.namespace('counted', { counting: true });
        await counted.seenMany(['https://a.example/1', 'https://a.example/2']);
        assert.deepEqual(await counted.forgetMany(['https://a.example/1', 'https://c.example/', 'bad']), [true, false, null]);
        assert.equal(await counted.forget('https://a.example/2'), true);

        await assert.rejects(client.namespace('x', { profile: 'nope' }), InvalidOption);
        // An existing namespace keeps its options: a second reserve is not an error.
        await client.namespace('plain', { capacity: 5 });

        await client.namespace('short', { ttl: 100 });
        const ttl = await client.ttl('short');
        assert.ok(ttl > 98 && ttl <= 100, `ttl ${ttl}`);
        assert.equal(await client.persist('short'), true);
        assert.equal(await client.ttl('short'), -1);
        assert.deepEqual(await client.names(), ['counted', 'plain', 'short']);
        assert.equal(await client.drop('short'), true);
        assert.equal(await client.ttl('short'), -2);
    } finally {
        client.close();
        assert.equal(await server.stop(), 0);
    }
    await assert.rejects(client.names(), Closed);
});

test('server down: ConnectionFailed, at connect and mid-session', async (t) => {
    const port = await freePort();
    await assert.rejects(Client.connect(`redis://127.0.0.1:${port}`), (e) => e instanceof ConnectionFailed && e.code === 'URLSEEN_CONNECTION');
    await assert.rejects(Client.connect('http://127.0.0.1:1'), InvalidOption);
    const server = await startServer(tmpdir(t));
    const client = await Client.connect(server.url);
    const ns = await client.namespace('n');
    assert.equal(await ns.seen('https://a.example/'), false);
    assert.equal(await server.stop(), 0);
    await assert.rejects(ns.seen('https://b.example/'), ConnectionFailed);
    client.close();
});

test('a server restarted on its data directory keeps every URL seen', async (t) => {
    const dir = tmpdir(t);
    const data = path.join(dir, 'data');
    const list = urls(20_000);
    let server = await startServer(dir, { data });
    let client = await Client.connect(server.url);
    const answers = await (await client.namespace('kept', { capacity: 1000 })).seenMany(list);
    const recorded = list.filter((_, i) => answers[i] === false);
    assert.ok(recorded.length > 19_000);
    client.close();
    assert.equal(await server.stop(), 0);

    server = await startServer(dir, { data });
    client = await Client.connect(server.url);
    try {
        const ns = await client.namespace('kept');
        assert.ok((await ns.containsMany(recorded)).every((x) => x === true));
    } finally {
        client.close();
        assert.equal(await server.stop(), 0);
    }
});
