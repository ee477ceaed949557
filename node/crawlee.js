// urlseen for Crawlee (`crawlee` / `@crawlee/core` 3.x): a storage client whose request
// queues answer "already present" from urlseen and hand only new requests to Crawlee's own
// queue underneath (its memory or file-system storage, @crawlee/memory-storage), so the queue
// holds the requests still to fetch, not every request ever seen. One line:
//
//     Configuration.useStorageClient(urlseenStorage({ path: './storage/urlseen' }));
//
// The extension point is Crawlee's `StorageClient.requestQueue(id)`, whose
// `batchAddRequests(requests, { forefront })` answers `{ processedRequests: [{ uniqueKey,
// requestId, wasAlreadyPresent, wasAlreadyHandled }], unprocessedRequests }`: RequestQueue
// (v1 and v2), `crawler.addRequests` and `enqueueLinks` all add through it.
'use strict';

const { createHash } = require('node:crypto');
const { Db } = require('./index.js');
const { Client } = require('./client.js');

/**
 * Requests a queue's namespace is sized for when the options give no `capacity`, whichever
 * home it is in. Not the server's own default (100, RedisBloom's): a namespace that small
 * starts as leaves of about 150 keys, each filled up to its false-positive bound before it
 * splits, and every false positive is a new request answered "already present", a page never
 * fetched (about 3 of the tests' 1,500 requests; none at this size).
 */
const DEFAULT_CAPACITY = 1_000_000;

/** The suffix of a queue's namespace of handled requests. */
const HANDLED_SUFFIX = ':handled';

/** Crawlee's request id of a unique key (@crawlee/memory-storage's `uniqueKeyToRequestId`). */
function requestId(uniqueKey) {
    const s = createHash('sha256').update(uniqueKey).digest('base64').replace(/(\+|\/|=)/g, '');
    return s.length > 15 ? s.slice(0, 15) : s;
}

/**
 * The storage client: Crawlee's datasets and key-value stores as `inner` keeps them, its request
 * queues deduplicated by urlseen. See `urlseenStorage` for the options.
 */
class UrlseenStorageClient {
    #options;
    #inner;
    #ownsInner;
    #seenSets = new Map();
    #db = null;
    #ownsDb = false;
    #client = null;

    constructor(options = {}) {
        this.#options = { namespace: 'crawlee', key: 'uniqueKey', dropHandled: true, ...options };
        if (this.#options.key !== 'uniqueKey' && this.#options.key !== 'url') {
            throw new TypeError(`urlseenStorage: key must be 'uniqueKey' or 'url', got ${JSON.stringify(this.#options.key)}`);
        }
        if ([options.db, options.path, options.server].filter((x) => x !== undefined).length > 1) {
            throw new TypeError('urlseenStorage: give one of db, path and server');
        }
        this.#ownsInner = options.inner === undefined;
        if (this.#ownsInner) {
            const { MemoryStorage } = require('@crawlee/memory-storage');
            this.#inner = new MemoryStorage(options.storageOptions);
        } else {
            this.#inner = options.inner;
        }
        if (options.db !== undefined) {
            this.#db = options.db;
        } else if (options.server === undefined) {
            this.#db = new Db(options.path ?? null, options.fsync ? { fsync: options.fsync } : undefined);
            this.#ownsDb = true;
        }
    }

    /**
     * The urlseen namespace of a queue (made on first use), named after the queue's name
     * (`default` for the default queue), not its id: a local storage gives each run's queue
     * (and each process's) an id of its own. `which`: `'seen'`, the requests added, or
     * `'handled'`, those handled (namespace `…:handled`), as the Python client keeps them.
     */
    async seenSet(queue, which = 'seen') {
        const suffix = which === 'handled' ? HANDLED_SUFFIX : '';
        const name = `${this.#options.namespace}:${await queue.queueName()}${suffix}`;
        let ns = this.#seenSets.get(name);
        if (ns) return ns;
        const o = this.#options;
        const options = {
            // Unique keys are any text (a user's own keys too): raw, not canonicalized.
            profile: o.key === 'uniqueKey' ? 'none' : (o.profile ?? 'crawler'),
            capacity: o.capacity ?? DEFAULT_CAPACITY,
            ...(o.fpr !== undefined && { fpr: o.fpr }),
            ...(o.exact !== undefined && { exact: o.exact }),
            ...(o.recrawlAfter !== undefined && { recrawlAfter: o.recrawlAfter }),
        };
        if (this.#db) {
            ns = this.#db.namespace(name, options);
        } else {
            this.#client ??= Client.connect(o.server);
            ns = await (await this.#client).namespace(name, options);
        }
        this.#seenSets.set(name, ns);
        return ns;
    }

    requestQueue(id, options) {
        return new UrlseenRequestQueueClient(this, this.#inner.requestQueue(id, options), id, {
            key: this.#options.key,
            dropHandled: this.#options.dropHandled,
            // A queue of our own MemoryStorage is this process's alone: a lock in it that this
            // process did not take was left by one that was killed.
            releaseStaleLocks: this.#options.releaseStaleLocks ?? this.#ownsInner,
        });
    }

    requestQueues() {
        return this.#inner.requestQueues();
    }

    datasets() {
        return this.#inner.datasets();
    }

    dataset(id) {
        return this.#inner.dataset(id);
    }

    keyValueStores() {
        return this.#inner.keyValueStores();
    }

    keyValueStore(id) {
        return this.#inner.keyValueStore(id);
    }

    /**
     * Crawlee's purge (`purgeOnStart`, the default): the inner storage's default stores, and,
     * with an embedded Db, the default queue's namespace, which a new crawl starts without. A
     * shared server's namespace is never dropped by one crawler (the others are using it).
     */
    async purge() {
        await this.#inner.purge?.();
        if (this.#db) {
            for (const name of [`${this.#options.namespace}:default`, `${this.#options.namespace}:default${HANDLED_SUFFIX}`]) {
                this.#seenSets.delete(name);
                this.#db.drop(name);
            }
        }
    }

    async teardown() {
        await this.#inner.teardown?.();
    }

    /** Closes the urlseen Db (if this client opened it) or the connection to the server. */
    async close() {
        if (this.#ownsDb) this.#db.close();
        if (this.#client) (await this.#client).close();
    }

    setStatusMessage(...args) {
        return this.#inner.setStatusMessage?.(...args);
    }

    get stats() {
        return this.#inner.stats;
    }
}

/** A request queue client: urlseen decides what is new; `inner` keeps the new requests. */
class UrlseenRequestQueueClient {
    #storage;
    #inner;
    #id;
    #options;
    #dropped = 0;
    #unlocked = null;
    #name = null;
    #drops = [];
    #lock = Promise.resolve();
    /** Ids of requests this client queued that another recorded first: finished unfetched when listed. */
    #theirs = new Set();
    /** Adds run one at a time: two of this process's own adds of one URL must not race (one would take the other's record for another process's). */
    #adding = Promise.resolve();

    constructor(storage, inner, id, options) {
        this.#storage = storage;
        this.#inner = inner;
        this.#id = id;
        this.#options = options;
    }

    /** The queue's name, or its id for an unnamed queue. */
    async queueName() {
        this.#name ??= this.#inner.get().then((info) => info?.name ?? this.#id);
        return this.#name;
    }

    /** Makes every request of `host` new again (its namespace's `forgetHost`); how many were forgotten. */
    async forgetHost(host) {
        await (await this.#storage.seenSet(this, 'handled')).forgetHost(host);
        return (await this.#storage.seenSet(this)).forgetHost(host);
    }

    /** The urlseen statistics of this queue's namespace. */
    async seenStats() {
        return (await this.#storage.seenSet(this)).stats();
    }

    /** The key urlseen records for a request. */
    #key(request) {
        return this.#options.key === 'url' ? request.url : request.uniqueKey;
    }

    /**
     * Looks the requests up, queues the new ones in the inner queue, then records them: a
     * process killed in between has them queued and not recorded, and fetches them when it
     * resumes, so no request is lost. A request another process (or a respelling earlier in
     * the batch) recorded since the lookup is answered present, and finished unfetched when
     * the queue lists it: the other one fetches it.
     */
    batchAddRequests(requests, options = {}) {
        const run = this.#adding.then(() => this.#add(requests, options));
        this.#adding = run.catch(() => {});
        return run;
    }

    async #add(requests, options) {
        const ns = await this.#storage.seenSet(this);
        const answers = await ns.containsMany(requests.map((r) => this.#key(r)));
        const present = requests.filter((_, i) => answers[i] === true);
        const handled = new Set();
        if (present.length > 0) {
            const handledSet = await this.#storage.seenSet(this, 'handled');
            const found = await handledSet.containsMany(present.map((r) => this.#key(r)));
            present.forEach((r, i) => found[i] === true && handled.add(r));
        }
        const processedRequests = [];
        const fresh = [];
        requests.forEach((request, i) => {
            if (answers[i] === true) {
                processedRequests.push({
                    uniqueKey: request.uniqueKey,
                    requestId: requestId(request.uniqueKey),
                    wasAlreadyPresent: true,
                    wasAlreadyHandled: handled.has(request),
                });
            } else {
                // New (false), or a key urlseen refuses (null, a URL its profile cannot
                // canonicalize): Crawlee's queue decides, as it would without urlseen.
                fresh.push(request);
            }
        });
        if (fresh.length === 0) return { processedRequests, unprocessedRequests: [] };
        const added = await this.#inner.batchAddRequests(fresh, options);
        // Recorded once queued, each key once; a request the inner queue refused is not
        // recorded (a later add offers it again).
        const taken = new Map(added.processedRequests.map((p) => [p.uniqueKey, p]));
        const keys = new Set();
        const queued = fresh.filter((r) => taken.has(r.uniqueKey) && !keys.has(r.uniqueKey) && keys.add(r.uniqueKey));
        const recorded = await ns.seenMany(queued.map((r) => this.#key(r)));
        queued.forEach((request, i) => {
            const processed = taken.get(request.uniqueKey);
            if (recorded[i] === true && !processed.wasAlreadyPresent) {
                this.#theirs.add(processed.requestId);
                taken.set(request.uniqueKey, { ...processed, wasAlreadyPresent: true });
            }
        });
        return {
            processedRequests: processedRequests.concat(added.processedRequests.map((p) => taken.get(p.uniqueKey) ?? p)),
            unprocessedRequests: added.unprocessedRequests,
        };
    }

    async addRequest(request, options = {}) {
        const { processedRequests, unprocessedRequests } = await this.batchAddRequests([request], options);
        if (processedRequests.length === 0) {
            throw new Error(`the request queue did not add ${unprocessedRequests[0]?.url ?? request.url}`);
        }
        const { requestId: id, wasAlreadyPresent, wasAlreadyHandled } = processedRequests[0];
        return { requestId: id, wasAlreadyPresent, wasAlreadyHandled };
    }

    /**
     * A handled request leaves the inner queue (`dropHandled`): urlseen remembers it. It is
     * deleted at the next listing of the queue, not here: Crawlee's local queue lists its
     * requests across awaits, and must not find one gone meanwhile.
     */
    async updateRequest(request, options) {
        // Recorded handled first: a kill before the inner queue's own mark leaves the request
        // there, and the next listing finishes it unfetched.
        if (request.handledAt) await (await this.#storage.seenSet(this, 'handled')).seenMany([this.#key(request)]);
        const info = await this.#inner.updateRequest(request, options);
        if (this.#options.dropHandled && request.handledAt) this.#drops.push(request.id);
        return info;
    }

    /** Runs `f` alone among the listings and deletions of this client. */
    #exclusive(f) {
        const run = this.#lock.then(f);
        this.#lock = run.catch(() => {});
        return run;
    }

    /**
     * The listing without the requests to finish unfetched, which it marks handled: those
     * another process recorded first, and those recorded handled before a kill that left them
     * in the inner queue.
     */
    async #finishTheirs(listing) {
        if (!listing?.items?.length) return listing;
        const handledSet = await this.#storage.seenSet(this, 'handled');
        const done = await handledSet.containsMany(listing.items.map((item) => this.#key(item)));
        const items = [];
        for (const [i, item] of listing.items.entries()) {
            if (!this.#theirs.delete(item.id) && done[i] !== true) {
                items.push(item);
                continue;
            }
            const request = await this.#inner.getRequest(item.id);
            if (request) {
                await this.#inner.updateRequest({ ...request, handledAt: request.handledAt ?? new Date().toISOString() });
            }
            if (this.#options.dropHandled) this.#drops.push(item.id);
        }
        return { ...listing, items };
    }

    /** Lists with `f`, then deletes the handled requests that were handled before it began. */
    #listing(f) {
        return this.#exclusive(async () => {
            await this.#releaseStaleLocks();
            const drops = this.#drops.splice(0);
            const result = await this.#finishTheirs(await f());
            // A forefront id still listed by the local queue must stay until a listing drops it.
            const forefront = new Set(this.#inner.forefrontRequestIds ?? []);
            for (const id of drops) {
                if (forefront.has(id)) continue;
                await this.#inner.deleteRequest(id);
                this.#dropped += 1;
            }
            return result;
        });
    }

    async get() {
        const info = await this.#inner.get();
        if (!info || !this.#dropped) return info;
        return {
            ...info,
            handledRequestCount: info.handledRequestCount + this.#dropped,
            totalRequestCount: info.totalRequestCount + this.#dropped,
        };
    }

    /**
     * Once, before the queue is first read: unlocks the requests a killed process left locked
     * (so that a resumed crawl fetches them now, not after the lock expires).
     */
    #releaseStaleLocks() {
        if (!this.#options.releaseStaleLocks) return undefined;
        this.#unlocked ??= (async () => {
            const head = await this.#inner.listHead({ limit: Number.MAX_SAFE_INTEGER });
            for (const item of head.items) {
                // Throws for a request that is not locked: nothing to release.
                await this.#inner.deleteRequestLock(item.id).catch(() => {});
            }
        })();
        return this.#unlocked;
    }

    listHead(options) {
        return this.#listing(() => this.#inner.listHead(options));
    }

    listAndLockHead(options) {
        return this.#listing(() => this.#inner.listAndLockHead(options));
    }

    update(fields) {
        return this.#inner.update(fields);
    }

    async delete() {
        await this.#inner.delete();
    }

    getRequest(id) {
        return this.#inner.getRequest(id);
    }

    deleteRequest(id) {
        return this.#exclusive(() => this.#inner.deleteRequest(id));
    }

    prolongRequestLock(id, options) {
        return this.#inner.prolongRequestLock(id, options);
    }

    deleteRequestLock(id, options) {
        return this.#inner.deleteRequestLock(id, options);
    }
}

/**
 * A Crawlee storage client deduplicating its request queues with urlseen:
 *
 *     Configuration.useStorageClient(urlseenStorage({ path: './storage/urlseen' }));
 *
 * Options:
 * - where the seen set lives, one of: `path` (an embedded Db in that data directory; none: in
 *   memory), `db` (a `Db` of yours), `server` (`redis://host:port` of `urlseen serve`, shared
 *   by every crawler process that names it);
 * - `key`: `'uniqueKey'` (the default: what Crawlee itself deduplicates on, custom keys
 *   included, recorded as raw text) or `'url'` (the request's URL, canonicalized with
 *   `profile`: `crawler` (default), `w3lib` or `safebrowsing`);
 * - `namespace` (default `crawlee`): queue `id` records into namespace `<namespace>:<id>`;
 * - `capacity` (default 1,000,000, also on a server, whose own default is far smaller), `fpr`
 *   (default 0.01), `exact`, `recrawlAfter` (seconds: a request added longer ago is new
 *   again): the namespace's options when it is created. A false positive is a new request
 *   answered "already present", never fetched: at most `fpr` of them once the namespace holds
 *   `capacity` requests, far fewer below; `exact` confirms each positive (no misses but
 *   64-bit fingerprint collisions, at the cost of the leaves' own records: docs/exact.md);
 * - `inner`: the storage that keeps the queue's new requests, datasets and key-value stores
 *   (default: `new MemoryStorage(storageOptions)`, Crawlee's own local storage);
 * - `dropHandled` (default true): a handled request is deleted from the inner queue, which
 *   then holds only what is still to fetch;
 * - `fsync`: of the embedded Db (`always`, `everysec`, `no`).
 */
function urlseenStorage(options = {}) {
    return new UrlseenStorageClient(options);
}

module.exports = { urlseenStorage, UrlseenStorageClient, UrlseenRequestQueueClient, requestId };
