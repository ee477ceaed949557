// Types of the `urlseen` package (index.js, client.js, errors.js).

export type Profile = 'crawler' | 'w3lib' | 'safebrowsing' | 'none';
export type FsyncPolicy = 'always' | 'everysec' | 'no';

/** Options of a namespace, used only by the call that creates it. */
export interface NamespaceOptions {
    /** Expected URLs (default 1,000,000): sizes the namespace; not a cap. */
    capacity?: number;
    /** False-positive bound (default 0.01). */
    fpr?: number;
    /** Canonicalization (default `crawler`; `none`: raw keys). */
    profile?: Profile;
    /** Confirm every Bloom positive against stored fingerprints. */
    exact?: boolean;
    /** Counting filters (implies `exact`), so that `forget()` works. */
    counting?: boolean;
    /** Keep every recorded URL (on disk), so that `forgetPrefix()` works. */
    keepUrls?: boolean;
    /** Lifetime in seconds of a namespace this call creates. */
    ttl?: number;
    /** Recrawl window in seconds: a URL recorded longer ago is new again. */
    recrawlAfter?: number;
    /** Generations of the recrawl window (default 8). */
    generations?: number;
}

/** `URL.INFO`'s fields (docs/protocol.md): `count`, `capacity`, `fpr_bound`, `memory_bytes`, ... */
export type NamespaceStats = Record<string, unknown> & {
    name: string;
    count: number;
    capacity: number;
    fpr_bound: number;
    memory_bytes: number;
};

/** An embedded urlseen database. `new Db()` is in memory; `new Db(path)` keeps it in `path`. */
export class Db {
    constructor(path?: string | null, options?: { fsync?: FsyncPolicy });
    static inMemory(): Db;
    /** The namespace `name`, created with `options` if it does not exist. */
    namespace(name: string, options?: NamespaceOptions): Namespace;
    names(): string[];
    drop(name: string): boolean;
    expire(name: string, seconds: number): boolean;
    persist(name: string): boolean;
    /** Seconds left: -2 no such namespace, -1 no lifetime. */
    ttl(name: string): number;
    sync(): void;
    close(): void;
    readonly closed: boolean;
    readonly path: string | null;
    readonly fsync: FsyncPolicy;
    [Symbol.dispose](): void;
}

/** One URL-seen set of a `Db`. Every call is synchronous. */
export class Namespace {
    private constructor();
    /** Check-and-insert: `true` seen before, `false` new and now recorded. Throws `InvalidUrl`. */
    seen(url: string): boolean;
    /** `seen` for many: `null` for an invalid URL (neither looked up nor recorded). */
    seenMany(urls: Iterable<string>): Array<boolean | null>;
    contains(url: string): boolean;
    containsMany(urls: Iterable<string>): Array<boolean | null>;
    /** Only with `counting: true`; else throws `ForgetUnsupported`. */
    forget(url: string): boolean;
    forgetMany(urls: Iterable<string>): Array<boolean | null>;
    /** Forgets every URL of `host`; how many. */
    forgetHost(host: string): number;
    /** Forgets every URL under `prefix` (namespace with `keepUrls: true`); how many. */
    forgetPrefix(prefix: string): number;
    stats(): NamespaceStats;
    expire(seconds: number): boolean;
    persist(): boolean;
    ttl(): number;
    readonly name: string;
    /** Distinct URLs recorded. */
    readonly size: number;
}

/** A client of `urlseen serve`: `Db`'s API over RESP, every call a Promise. */
export class Client {
    constructor(url: string, options?: { connectTimeoutMs?: number });
    /** Connects to `redis://[user:password@]host[:port]`. */
    static connect(url?: string, options?: { connectTimeoutMs?: number }): Promise<Client>;
    namespace(name: string, options?: NamespaceOptions): Promise<RemoteNamespace>;
    drop(name: string): Promise<boolean>;
    expire(name: string, seconds: number): Promise<boolean>;
    persist(name: string): Promise<boolean>;
    ttl(name: string): Promise<number>;
    names(): Promise<string[]>;
    /** One raw command; its reply. */
    command(...args: Array<string | number | Buffer>): Promise<unknown>;
    /** Raw commands in one pipeline; their replies. */
    pipeline(commands: Array<Array<string | number | Buffer>>): Promise<unknown[]>;
    close(): void;
    readonly url: string;
    [Symbol.dispose](): void;
}

/** A namespace on `urlseen serve`: `Namespace`'s methods as Promises. */
export class RemoteNamespace {
    private constructor();
    readonly name: string;
    seen(url: string): Promise<boolean>;
    seenMany(urls: Iterable<string>): Promise<Array<boolean | null>>;
    contains(url: string): Promise<boolean>;
    containsMany(urls: Iterable<string>): Promise<Array<boolean | null>>;
    forget(url: string): Promise<boolean>;
    forgetMany(urls: Iterable<string>): Promise<Array<boolean | null>>;
    forgetHost(host: string): Promise<number>;
    forgetPrefix(prefix: string): Promise<number>;
    stats(): Promise<NamespaceStats>;
    size(): Promise<number>;
    expire(seconds: number): Promise<boolean>;
    persist(): Promise<boolean>;
    ttl(): Promise<number>;
}

export function version(): string;

export type ErrorCode =
    | 'URLSEEN_ERROR'
    | 'URLSEEN_INVALID_URL'
    | 'URLSEEN_INVALID_OPTION'
    | 'URLSEEN_FORGET_UNSUPPORTED'
    | 'URLSEEN_LOCKED'
    | 'URLSEEN_STORAGE'
    | 'URLSEEN_CLOSED'
    | 'URLSEEN_SERVER'
    | 'URLSEEN_CONNECTION';

/** The base of every error urlseen throws. */
export class UrlseenError extends Error {
    readonly code: ErrorCode;
}
export class InvalidUrl extends UrlseenError {}
export class InvalidOption extends UrlseenError {}
export class ForgetUnsupported extends UrlseenError {}
export class Locked extends UrlseenError {}
export class StorageError extends UrlseenError {}
export class Closed extends UrlseenError {}
export class ServerError extends UrlseenError {}
export class ConnectionFailed extends UrlseenError {}
