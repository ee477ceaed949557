// A crawl without the network through a Crawlee request queue, as a crawler drives it: Crawlee's
// default queue against the same with urlseen. The model of python/bench/crawlee_bench.py:
// 1,000 start URLs are added; then each request fetched (`fetchNextRequest`) is marked handled
// (`markRequestHandled`) after its page "discovers" `links` links (`addRequests`): one URL not
// seen before, while there are any, and `links - 1` URLs found earlier (drawn at random, handled
// or not), so the backlog stays about 1,000 requests and every URL is found `links` times. The
// run ends when the queue is finished. Each mode runs in a process of its own, and reports
// requests handled, links added, wall time and its peak RSS (getrusage's ru_maxrss).
//
//   node bench/queue.js [urls=1000000] [links=4] [modes=crawlee-memory,urlseen-memory] [--feed]
//
// `--feed` feeds the queue directly instead, fetching nothing: `urls × links` adds in batches
// of 1,000, each URL found `links` times spread over the run; "handled" then counts the adds
// answered new. (Crawlee's memory queue lists from its first request, handled ones included, so
// its crawl at 1,000,000 would take hours; fed, it runs.)
//
// Modes: `crawlee-memory` (Crawlee's MemoryStorage, in memory), `urlseen-memory`
// (urlseenStorage over it, the seen set in an embedded Db in memory), `urlseen-serve` (the
// same, the seen set in a `urlseen serve` started for the run; its peak RSS, VmHWM, is reported
// beside the crawler's).
'use strict';

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const MODES = ['crawlee-memory', 'urlseen-memory', 'urlseen-serve'];
const START = 1000;

const url = (i) => `https://site${i % 997}.example/page/${i}?ref=${i % 13}`;

/** A seeded generator of uniform numbers in [0, 1) (mulberry32): the same links every run. */
function random(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

async function crawl(mode, urls, links, server, feed) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'urlseen-bench-'));
    // Crawlee reads its configuration from the environment when it is first loaded.
    process.env.CRAWLEE_STORAGE_DIR = dir;
    process.env.CRAWLEE_PERSIST_STORAGE = '0';
    const { Configuration, RequestQueue, log } = require('@crawlee/core');
    log.setLevel(log.LEVELS.WARNING);
    let storage = null;
    if (mode === 'urlseen-memory') {
        storage = require('../crawlee.js').urlseenStorage();
    } else if (mode === 'urlseen-serve') {
        storage = require('../crawlee.js').urlseenStorage({ server });
    } else if (mode !== 'crawlee-memory') {
        throw new Error(`unknown mode ${mode}`);
    }
    if (storage) Configuration.useStorageClient(storage);
    const queue = await RequestQueue.open();

    if (feed) {
        const started = process.hrtime.bigint();
        let fresh = 0;
        for (let i = 0; i < urls * links; i += 1000) {
            const batch = [];
            for (let j = i; j < Math.min(i + 1000, urls * links); j++) batch.push({ url: url((j * 7919) % urls) });
            const r = await queue.addRequests(batch);
            fresh += r.processedRequests.filter((p) => !p.wasAlreadyPresent).length;
        }
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        if (storage) await storage.close();
        fs.rmSync(dir, { recursive: true, force: true });
        return { mode, urls, handled: fresh, links: urls * links, seconds, maxRssKib: process.resourceUsage().maxRSS };
    }
    const rng = random(42);
    let found = START;
    let added = 0;
    let handled = 0;
    const started = process.hrtime.bigint();
    await queue.addRequests(Array.from({ length: START }, (_, i) => ({ url: url(i) })));
    for (;;) {
        const request = await queue.fetchNextRequest();
        if (request === null) {
            if (await queue.isFinished()) break;
            continue;
        }
        const batch = [];
        if (found < urls) batch.push({ url: url(found++) });
        while (batch.length < links) batch.push({ url: url(Math.floor(rng() * found)) });
        await queue.addRequests(batch);
        added += batch.length;
        await queue.markRequestHandled(request);
        handled += 1;
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (storage) await storage.close();
    fs.rmSync(dir, { recursive: true, force: true });
    return { mode, urls, handled, links: added, seconds, maxRssKib: process.resourceUsage().maxRSS };
}

/** Starts `urlseen serve` (this package's command) on a free port; resolves when it listens. */
async function serve(dir) {
    const port = await new Promise((resolve, reject) => {
        const s = net.createServer().listen(0, '127.0.0.1', () => {
            const { port: p } = s.address();
            s.close(() => resolve(p));
        });
        s.on('error', reject);
    });
    const bin = path.join(__dirname, '..', 'bin', 'urlseen.js');
    const child = spawn(
        process.execPath,
        [bin, 'serve', '--resp', `127.0.0.1:${port}`, '--http', 'off', '--spill-dir', dir],
        { stdio: 'ignore' },
    );
    for (let i = 0; i < 300; i++) {
        const up = await new Promise((resolve) => {
            const c = net.connect(port, '127.0.0.1', () => c.end(() => resolve(true)));
            c.on('error', () => resolve(false));
        });
        if (up) return { child, url: `redis://127.0.0.1:${port}` };
        await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGTERM');
    throw new Error('urlseen serve did not start');
}

/** A process's peak RSS in KiB (VmHWM), read while it still runs. */
function peakRssKib(pid) {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : NaN;
}

async function main() {
    const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
    const urls = Number(args[0] ?? 1_000_000);
    const links = Number(args[1] ?? 4);
    const modes = (args[2] ?? 'crawlee-memory,urlseen-memory').split(',');
    const feed = process.argv.includes('--feed');
    for (const mode of modes) if (!MODES.includes(mode)) throw new Error(`unknown mode ${mode} (${MODES.join(', ')})`);

    const crawlee = require('@crawlee/core/package.json').version;
    const n = (x) => x.toLocaleString('en-US');
    console.log(`# ${n(urls)} URLs, each found ${links} times${feed ? ', fed to the queue (nothing fetched)' : ''}; node ${process.version}, @crawlee/core ${crawlee}`);
    console.log(`${'mode'.padEnd(16)} ${(feed ? 'new' : 'handled').padStart(9)} ${'links'.padStart(10)} ${'seconds'.padStart(8)} ${'peak RSS MiB'.padStart(13)}`);
    for (const mode of modes) {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'urlseen-bench-serve-'));
        const server = mode === 'urlseen-serve' ? await serve(dir) : null;
        try {
            // spawnSync blocks this loop; the server is a process of its own and runs on.
            const run = spawnSync(
                process.execPath,
                [__filename, '--child', JSON.stringify({ mode, urls, links, server: server?.url, feed })],
                { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 20 },
            );
            if (run.status !== 0) {
                console.error(`${mode}: failed (status ${run.status}, signal ${run.signal})`);
                continue;
            }
            const r = JSON.parse(run.stdout.trim().split('\n').pop());
            const mib = (kib) => (kib / 1024).toFixed(1);
            const serverRss = server ? `   (server ${mib(peakRssKib(server.child.pid))})` : '';
            console.log(
                `${mode.padEnd(16)} ${n(r.handled).padStart(9)} ${n(r.links).padStart(10)} ${r.seconds.toFixed(1).padStart(8)} ${mib(r.maxRssKib).padStart(13)}${serverRss}`,
            );
        } finally {
            if (server && server.child.exitCode === null && server.child.signalCode === null) {
                const exited = new Promise((r) => server.child.once('exit', r));
                server.child.kill('SIGTERM');
                await exited;
            }
            fs.rmSync(dir, { recursive: true, force: true });
        }
    }
}

if (process.argv.includes('--child')) {
    const o = JSON.parse(process.argv[process.argv.indexOf('--child') + 1]);
    crawl(o.mode, o.urls, o.links, o.server, o.feed).then(
        (r) => {
            process.stdout.write(`${JSON.stringify(r)}\n`);
            process.exit(0);
        },
        (err) => {
            console.error(err);
            process.exit(1);
        },
    );
} else {
    main().catch((err) => {
        console.error(err);
        process.exit(1);
    });
}
