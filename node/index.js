// urlseen for Node.js: the embedded engine (`Db`), a client of `urlseen serve` (`Client`),
// and their errors. The Crawlee integration is `urlseen/crawlee`.
'use strict';

const errors = require('./errors.js');
const { Client, RemoteNamespace } = require('./client.js');

let native;
function addon() {
    // Loaded on first use, so that `Client` works without the addon's symbols being touched.
    native ??= require('./native.js');
    return native;
}

/** Runs `f`, throwing a native error as its urlseen class. */
function call(f) {
    try {
        return f();
    } catch (err) {
        throw errors.fromNative(err);
    }
}

/**
 * An embedded urlseen database: namespaces of URLs, each an independent URL-seen set.
 * `new Db()` lives in memory; `new Db(path)` keeps everything in the data directory `path`.
 */
class Db {
    #db;

    constructor(path = null, options = undefined) {
        this.#db = call(() => new (addon().JsDb)(path ?? null, options ?? undefined));
    }

    /** An in-memory Db. */
    static inMemory() {
        return new Db();
    }

    namespace(name, options = undefined) {
        return new Namespace(call(() => this.#db.namespace(name, options ?? undefined)));
    }

    names() {
        return call(() => this.#db.names());
    }

    drop(name) {
        return call(() => this.#db.drop(name));
    }

    expire(name, seconds) {
        return call(() => this.#db.expire(name, seconds));
    }

    persist(name) {
        return call(() => this.#db.persist(name));
    }

    ttl(name) {
        return call(() => this.#db.ttl(name));
    }

    sync() {
        call(() => this.#db.sync());
    }

    close() {
        call(() => this.#db.close());
    }

    get closed() {
        return this.#db.closed;
    }

    get path() {
        return this.#db.path ?? null;
    }

    get fsync() {
        return this.#db.fsync;
    }

    [Symbol.dispose]() {
        this.close();
    }
}

/** One URL-seen set of a `Db` (from `Db.namespace`). Every call is synchronous. */
class Namespace {
    #ns;

    constructor(ns) {
        this.#ns = ns;
    }

    seen(url) {
        return call(() => this.#ns.seen(url));
    }

    seenMany(urls) {
        return call(() => this.#ns.seenMany(Array.isArray(urls) ? urls : [...urls]));
    }

    contains(url) {
        return call(() => this.#ns.contains(url));
    }

    containsMany(urls) {
        return call(() => this.#ns.containsMany(Array.isArray(urls) ? urls : [...urls]));
    }

    forget(url) {
        return call(() => this.#ns.forget(url));
    }

    forgetMany(urls) {
        return call(() => this.#ns.forgetMany(Array.isArray(urls) ? urls : [...urls]));
    }

    forgetHost(host) {
        return call(() => this.#ns.forgetHost(host));
    }

    forgetPrefix(prefix) {
        return call(() => this.#ns.forgetPrefix(prefix));
    }

    stats() {
        return call(() => this.#ns.stats());
    }

    expire(seconds) {
        return call(() => this.#ns.expire(seconds));
    }

    persist() {
        return call(() => this.#ns.persist());
    }

    ttl() {
        return call(() => this.#ns.ttl());
    }

    get name() {
        return this.#ns.name;
    }

    /** Distinct URLs recorded. */
    get size() {
        return this.#ns.size;
    }
}

/** The version of the urlseen crates the addon was built from. */
function version() {
    return addon().version();
}

module.exports = {
    Db,
    Namespace,
    Client,
    RemoteNamespace,
    version,
    UrlseenError: errors.UrlseenError,
    InvalidUrl: errors.InvalidUrl,
    InvalidOption: errors.InvalidOption,
    ForgetUnsupported: errors.ForgetUnsupported,
    Locked: errors.Locked,
    StorageError: errors.StorageError,
    Closed: errors.Closed,
    ServerError: errors.ServerError,
    ConnectionFailed: errors.ConnectionFailed,
};
