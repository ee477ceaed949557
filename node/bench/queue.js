// Feeds discovered URLs to a Crawlee request queue, as `enqueueLinks` would, and prints the
// time and the process's peak RSS: Crawlee's default queue against the same with urlseen.
// Each mode runs in a process of its own (peak RSS is per process).
//
//   node bench/queue.js [discovered=1000000] [repeats=5]
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const [discovered = 1_000_000, repeats = 5] = process.argv.slice(2).filter((a) => !a.startsWith('--')).map(Number);

async function child(mode) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'urlseen-bench-'));
    process.env.CRAWLEE_STORAGE_DIR = dir;
    process.env.CRAWLEE_PERSIST_STORAGE = '0';
    const { Configuration, RequestQueue, log } = require('@crawlee/core');
    log.setLevel(log.LEVELS.WARNING);
    if (mode === 'urlseen') {
        const { urlseenStorage } = require('../crawlee.js');
        Configuration.useStorageClient(urlseenStorage({ capacity: discovered / repeats }));
    }
    const queue = await RequestQueue.open();
    const distinct = Math.floor(discovered / repeats);
    const started = process.hrtime.bigint();
    let added = 0;
    const BATCH = 1000;
    for (let i = 0; i < discovered; i += BATCH) {
        const batch = [];
        for (let j = i; j < Math.min(i + BATCH, discovered); j++) {
            // Each distinct URL is found `repeats` times, spread over the crawl.
            const k = (j * 7919) % distinct;
            batch.push({ url: `https://site${k % 1000}.example/page/${k}?ref=${k % 7}` });
        }
        const r = await queue.addRequests(batch);
        added += r.processedRequests.filter((p) => !p.wasAlreadyPresent).length;
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    fs.rmSync(dir, { recursive: true, force: true });
    return { mode, discovered, distinct, added, seconds, maxRssMiB: Math.round(process.resourceUsage().maxRSS / 1024) };
}

if (process.argv.includes('--child')) {
    child(process.argv[process.argv.indexOf('--child') + 1]).then((r) => {
        process.stdout.write(`${JSON.stringify(r)}\n`);
        process.exit(0);
    });
} else {
    console.log(`${discovered} discovered URLs (${discovered / repeats} distinct), batches of 1,000, node ${process.version}`);
    console.log('mode      added     seconds  URLs/s     peak RSS (MiB)');
    for (const mode of ['crawlee', 'urlseen']) {
        const run = spawnSync(process.execPath, [__filename, String(discovered), String(repeats), '--child', mode], {
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'inherit'],
            maxBuffer: 1 << 20,
        });
        if (run.status !== 0) throw new Error(`${mode} failed`);
        const r = JSON.parse(run.stdout.trim().split('\n').pop());
        console.log(`${mode.padEnd(9)} ${String(r.added).padEnd(9)} ${r.seconds.toFixed(1).padEnd(8)} ${Math.round(discovered / r.seconds).toString().padEnd(10)} ${r.maxRssMiB}`);
    }
}
