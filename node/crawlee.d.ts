// Types of `urlseen/crawlee`.
import type { StorageClient, RequestQueueClient } from '@crawlee/types';
import type { Db, FsyncPolicy, Namespace, NamespaceStats, Profile, RemoteNamespace } from './index';

export interface UrlseenStorageOptions {
    /** Data directory of an embedded Db (none: in memory). */
    path?: string;
    /** An embedded Db of your own. */
    db?: Db;
    /** `redis://host:port` of `urlseen serve`, shared by every crawler that names it. */
    server?: string;
    /** What is deduplicated: Crawlee's `uniqueKey` (default, raw) or the URL, canonicalized. */
    key?: 'uniqueKey' | 'url';
    /** The canonicalization of `key: 'url'` (default `crawler`). */
    profile?: Exclude<Profile, 'none'>;
    /** Namespace prefix (default `crawlee`): queue `q` records into `<namespace>:<q>`. */
    namespace?: string;
    /** Requests the namespace is sized for (default 1,000,000, on a server too); not a cap. */
    capacity?: number;
    /** False-positive bound (default 0.01): a false positive is a request never fetched. */
    fpr?: number;
    /** Confirm every Bloom positive: no request missed but for 64-bit fingerprint collisions. */
    exact?: boolean;
    /** Seconds: a request added longer ago is new again. */
    recrawlAfter?: number;
    /** Keeps the new requests, datasets and key-value stores (default: Crawlee's MemoryStorage). */
    inner?: StorageClient;
    /** Options of the default inner MemoryStorage. */
    storageOptions?: Record<string, unknown>;
    /** Delete handled requests from the inner queue (default true). */
    dropHandled?: boolean;
    /** Unlock requests a killed run left locked (default: when the inner storage is our own). */
    releaseStaleLocks?: boolean;
    fsync?: FsyncPolicy;
}

/** A queue's client (`(await RequestQueue.open()).client`): Crawlee's, plus urlseen's own operations. */
export interface UrlseenRequestQueueClient extends RequestQueueClient {
    /** Makes every request of `host` new again; how many were forgotten. */
    forgetHost(host: string): Promise<number>;
    /** The urlseen statistics of the queue's namespace. */
    seenStats(): Promise<NamespaceStats>;
}

export class UrlseenStorageClient implements StorageClient {
    constructor(options?: UrlseenStorageOptions);
    requestQueue(id: string, options?: { clientKey?: string; timeoutSecs?: number }): UrlseenRequestQueueClient;
    /** The urlseen namespace of a queue (made on first use). */
    seenSet(queue: UrlseenRequestQueueClient): Promise<Namespace | RemoteNamespace>;
    requestQueues(): ReturnType<StorageClient['requestQueues']>;
    datasets(): ReturnType<StorageClient['datasets']>;
    dataset(id: string): ReturnType<StorageClient['dataset']>;
    keyValueStores(): ReturnType<StorageClient['keyValueStores']>;
    keyValueStore(id: string): ReturnType<StorageClient['keyValueStore']>;
    purge(): Promise<void>;
    teardown(): Promise<void>;
    /** Closes the Db this client opened, or its connection to the server. */
    close(): Promise<void>;
}

/** `Configuration.useStorageClient(urlseenStorage({ path: './storage/urlseen' }))`. */
export function urlseenStorage(options?: UrlseenStorageOptions): UrlseenStorageClient;
/** Crawlee's request id of a unique key. */
export function requestId(uniqueKey: string): string;
