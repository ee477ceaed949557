// Crawls a site with Crawlee's CheerioCrawler in this process and prints a JSON report as its
// last stdout line: pages handled, failed, wall time, peak RSS. Run by the crawl tests (one
// process per crawl, so that a test can kill it) with one JSON argument:
//
//   node crawl.js '{"start": URL, "storage": DIR, "mode": "crawlee"|"embedded"|"server",
//                   "path": DIR, "server": "redis://...", "purge": true, "persist": false, "key": "uniqueKey"|"url"}'
'use strict';

const opts = JSON.parse(process.argv[2]);
// Crawlee reads its configuration from the environment when it is first loaded.
process.env.CRAWLEE_STORAGE_DIR = opts.storage;
process.env.CRAWLEE_PURGE_ON_START = opts.purge === false ? '0' : '1';
// Files only where a test resumes a crawl: writing every request as a file is most of a crawl's time.
process.env.CRAWLEE_PERSIST_STORAGE = opts.persist ? '1' : '0';

const { CheerioCrawler, Configuration, log } = require('@crawlee/cheerio');
const { urlseenStorage } = require('../crawlee.js');

async function main() {
    log.setLevel(log.LEVELS.WARNING);
    let storage = null;
    if (opts.mode === 'embedded') {
        storage = urlseenStorage({ path: opts.path, key: opts.key ?? 'uniqueKey' });
    } else if (opts.mode === 'server') {
        storage = urlseenStorage({ server: opts.server, key: opts.key ?? 'uniqueKey' });
    } else if (opts.mode !== 'crawlee') {
        throw new Error(`unknown mode ${opts.mode}`);
    }
    // The one line that switches urlseen on.
    if (storage) Configuration.useStorageClient(storage);

    let handled = 0;
    let failed = 0;
    const crawler = new CheerioCrawler({
        // At full concurrency from the start: the autoscaled pool would otherwise ramp up from 1.
        minConcurrency: opts.concurrency ?? 8,
        maxConcurrency: opts.concurrency ?? 8,
        // A request the site never answered (a connection reset under load) is tried again.
        maxRequestRetries: 2,
        requestHandlerTimeoutSecs: 30,
        async requestHandler({ enqueueLinks }) {
            await enqueueLinks({ strategy: 'same-hostname' });
            handled += 1;
        },
        failedRequestHandler() {
            failed += 1;
        },
    });
    const started = process.hrtime.bigint();
    await crawler.run([opts.start]);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (storage) await storage.close();
    const report = { mode: opts.mode, handled, failed, seconds, maxRssKib: process.resourceUsage().maxRSS };
    process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
    () => process.exit(0),
    (err) => {
        console.error(err);
        process.exit(1);
    },
);
