// A client of `urlseen serve`: the embedded API (`Db`/`Namespace`) over RESP, with every call
// a Promise. Written here on `node:net` rather than with ioredis: it needs about 250 lines
// (RESP3 framing, pipelining, reconnection), no dependency, and it can read URL.INFO in
// RESP3 (doubles and booleans typed, as the embedded `stats()` gives them), which ioredis
// does not speak.
'use strict';

const net = require('node:net');
const { ConnectionFailed, InvalidOption, InvalidUrl, ServerError, Closed, fromReply } = require('./errors.js');

/** URLs per `URL.SEEN` call of a batch: the calls of one batch go out in one pipeline, and
 * the server runs consecutive calls on one namespace as one engine batch (up to 512 calls). */
const URLS_PER_CALL = 512;

const INCOMPLETE = Symbol('incomplete');
const CRLF = Buffer.from('\r\n');

/** An error reply, kept as a value until it is handed to its caller. */
class ReplyError {
    constructor(message) {
        this.message = message;
    }
}

/** Encodes one command as a RESP array of bulk strings. */
function encode(args) {
    const parts = [Buffer.from(`*${args.length}\r\n`)];
    for (const arg of args) {
        const b = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg));
        parts.push(Buffer.from(`$${b.length}\r\n`), b, CRLF);
    }
    return parts;
}

/** Parses one RESP2/RESP3 frame of `buf` at `pos`: `[value, next]`, or INCOMPLETE. */
function parse(buf, pos) {
    if (pos >= buf.length) return INCOMPLETE;
    const end = buf.indexOf(CRLF, pos);
    if (end < 0) return INCOMPLETE;
    const type = buf[pos];
    const line = buf.toString('utf8', pos + 1, end);
    let next = end + 2;
    switch (type) {
        case 0x2b: // + simple string
            return [line, next];
        case 0x2d: // - error
            return [new ReplyError(line), next];
        case 0x3a: // : integer
            return [Number(line), next];
        case 0x28: // ( big number
            return [BigInt(line), next];
        case 0x2c: // , double
            return [line === 'inf' ? Infinity : line === '-inf' ? -Infinity : Number(line), next];
        case 0x23: // # boolean
            return [line === 't', next];
        case 0x5f: // _ null
            return [null, next];
        case 0x24: // $ bulk
        case 0x3d: // = verbatim
        case 0x21: {
            // ! blob error
            const len = Number(line);
            if (len < 0) return [null, next];
            if (buf.length < next + len + 2) return INCOMPLETE;
            let text = buf.toString('utf8', next, next + len);
            if (type === 0x3d) text = text.slice(4); // "txt:"
            next += len + 2;
            return [type === 0x21 ? new ReplyError(text) : text, next];
        }
        case 0x2a: // * array
        case 0x7e: // ~ set
        case 0x3e: // > push
        case 0x25: // % map
        case 0x7c: {
            // | attribute (skipped: the reply follows it)
            const n = Number(line);
            if (n < 0) return [null, next];
            const count = type === 0x25 || type === 0x7c ? 2 * n : n;
            const items = new Array(count);
            for (let i = 0; i < count; i++) {
                const r = parse(buf, next);
                if (r === INCOMPLETE) return INCOMPLETE;
                [items[i], next] = r;
            }
            if (type === 0x7c) return parse(buf, next);
            if (type !== 0x25) return [items, next];
            const map = {};
            for (let i = 0; i < count; i += 2) map[String(items[i])] = items[i + 1];
            return [map, next];
        }
        default:
            throw new ConnectionFailed(`urlseen serve sent a byte that starts no RESP frame: ${type}`);
    }
}

/** One connection: commands written in order, replies matched to them in order. */
class Connection {
    constructor(socket) {
        this.socket = socket;
        this.pending = [];
        this.buf = Buffer.alloc(0);
        this.broken = null;
        socket.setNoDelay(true);
        socket.on('data', (chunk) => this.#receive(chunk));
        socket.on('error', (err) => this.#fail(new ConnectionFailed(`connection to urlseen serve failed: ${err.message}`)));
        socket.on('close', () => this.#fail(new ConnectionFailed('urlseen serve closed the connection')));
    }

    static open(host, port, timeoutMs) {
        return new Promise((resolve, reject) => {
            const socket = net.connect({ host, port });
            const timer = setTimeout(() => {
                socket.destroy();
                reject(new ConnectionFailed(`urlseen serve at ${host}:${port} did not answer in ${timeoutMs} ms`));
            }, timeoutMs);
            socket.once('connect', () => {
                clearTimeout(timer);
                socket.removeAllListeners('error');
                resolve(new Connection(socket));
            });
            socket.once('error', (err) => {
                clearTimeout(timer);
                reject(new ConnectionFailed(`cannot reach urlseen serve at ${host}:${port}: ${err.message}`));
            });
        });
    }

    /** Sends the commands in one write; resolves with their replies (errors as ReplyError). */
    send(commands) {
        if (this.broken) return Promise.reject(this.broken);
        const parts = [];
        const replies = commands.map(
            (args) =>
                new Promise((resolve, reject) => {
                    parts.push(...encode(args));
                    this.pending.push({ resolve, reject });
                }),
        );
        this.socket.write(Buffer.concat(parts));
        return Promise.all(replies);
    }

    #receive(chunk) {
        this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
        let pos = 0;
        try {
            while (this.pending.length) {
                const r = parse(this.buf, pos);
                if (r === INCOMPLETE) break;
                const [value, next] = r;
                pos = next;
                this.pending.shift().resolve(value);
            }
        } catch (err) {
            this.#fail(err);
            this.socket.destroy();
            return;
        }
        this.buf = this.buf.subarray(pos);
    }

    #fail(err) {
        if (!this.broken) this.broken = err;
        for (const p of this.pending.splice(0)) p.reject(this.broken);
    }

    close() {
        this.broken ??= new Closed('the client is closed');
        this.socket.end();
        this.socket.destroy();
    }
}

/** `redis://[user:password@]host[:port][/db]` as connection settings. */
function parseUrl(url) {
    let u;
    try {
        u = new URL(url);
    } catch {
        throw new InvalidOption(`bad server URL ${JSON.stringify(url)}: expected redis://host:port`);
    }
    if (u.protocol !== 'redis:') throw new InvalidOption(`bad server URL ${JSON.stringify(url)}: expected redis://host:port`);
    return {
        host: u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
        port: Number(u.port || 6379),
        username: u.username ? decodeURIComponent(u.username) : null,
        password: u.password ? decodeURIComponent(u.password) : null,
    };
}

/** Throws a reply that is an error; returns any other. */
function value(reply) {
    if (reply instanceof ReplyError) throw fromReply(reply.message);
    return reply;
}

/**
 * A client of `urlseen serve`, with the API of `Db`: `(await Client.connect(url)).namespace(name)`
 * gives a namespace with the methods of `Db.namespace`'s, each returning a Promise. One
 * connection, made at once and again after a connection error (a failed call is not retried:
 * it may have been applied; it throws `ConnectionFailed`).
 */
class Client {
    #settings;
    #conn = null;
    #connecting = null;
    #closed = false;
    #timeoutMs;

    constructor(url, options = {}) {
        this.url = url;
        this.#settings = parseUrl(url);
        this.#timeoutMs = options.connectTimeoutMs ?? 10_000;
    }

    /** Connects to `url` (`redis://host:port`), switching the connection to RESP3. */
    static async connect(url = 'redis://127.0.0.1:6379', options = {}) {
        const client = new Client(url, options);
        await client.#connection();
        return client;
    }

    async #connection() {
        if (this.#closed) throw new Closed('the client is closed');
        if (this.#conn && !this.#conn.broken) return this.#conn;
        this.#connecting ??= (async () => {
            const { host, port, username, password } = this.#settings;
            const conn = await Connection.open(host, port, this.#timeoutMs);
            const hello = ['HELLO', '3'];
            if (password !== null) hello.push('AUTH', username ?? 'default', password);
            const [reply] = await conn.send([hello]);
            if (reply instanceof ReplyError) {
                conn.close();
                throw new ServerError(reply.message);
            }
            this.#conn = conn;
            return conn;
        })().finally(() => {
            this.#connecting = null;
        });
        return this.#connecting;
    }

    /** Sends commands in one pipeline; their raw replies, errors as values. */
    async pipeline(commands) {
        const conn = await this.#connection();
        return conn.send(commands);
    }

    /** One command; its reply, or the error it answered, thrown as its class. */
    async command(...args) {
        const [reply] = await this.pipeline([args]);
        return value(reply);
    }

    /**
     * The namespace `name` on the server, created there with `options` if it does not exist
     * (`URL.RESERVE`); an existing one keeps its own options.
     */
    async namespace(name, options = {}) {
        const args = ['URL.RESERVE', name];
        if (options.capacity !== undefined) args.push('CAPACITY', options.capacity);
        if (options.fpr !== undefined) args.push('ERROR', options.fpr);
        if (options.profile !== undefined) args.push('PROFILE', options.profile);
        if (options.exact) args.push('EXACT');
        if (options.counting) args.push('COUNTING');
        if (options.recrawlAfter !== undefined) {
            args.push('RECRAWL', options.recrawlAfter);
            if (options.generations !== undefined) args.push('GENERATIONS', options.generations);
        }
        if (options.keepUrls) args.push('KEEPURLS');
        if (options.ttl !== undefined) args.push('TTL', options.ttl);
        try {
            await this.command(...args);
        } catch (err) {
            // An existing namespace keeps its options, as `Db.namespace` does.
            if (!(err instanceof ServerError && err.message.includes('item exists'))) throw err;
        }
        return new RemoteNamespace(this, name);
    }

    /** Drops namespace `name` (`DEL`); whether it existed. */
    async drop(name) {
        return (await this.command('DEL', name)) > 0;
    }

    /** Namespace `name` expires `seconds` from now (`PEXPIRE`); whether it exists. */
    async expire(name, seconds) {
        if (!Number.isFinite(seconds)) throw new InvalidOption(`seconds must be finite, got ${seconds}`);
        return (await this.command('PEXPIRE', name, Math.round(seconds * 1000))) > 0;
    }

    /** Removes the lifetime of namespace `name` (`PERSIST`); whether it had one. */
    async persist(name) {
        return (await this.command('PERSIST', name)) > 0;
    }

    /** Seconds namespace `name` has left (`TTL`): -2 no such namespace, -1 no lifetime. */
    async ttl(name) {
        return this.command('TTL', name);
    }

    /** Names of the namespaces on the server, sorted. */
    async names() {
        return (await this.command('KEYS', '*')).sort();
    }

    /** Closes the connection; later calls throw `Closed`. */
    close() {
        this.#closed = true;
        this.#conn?.close();
        this.#conn = null;
    }

    [Symbol.dispose]() {
        this.close();
    }
}

/** A namespace on `urlseen serve` (from `Client.namespace`): `Namespace`'s methods, as Promises. */
class RemoteNamespace {
    #client;

    constructor(client, name) {
        this.#client = client;
        this.name = name;
    }

    async #single(command, url) {
        const reply = await this.#client.command(command, this.name, url);
        const n = Array.isArray(reply) && reply.length === 1 ? reply[0] : undefined;
        if (n === 1) return true;
        if (n === 0) return false;
        if (n === -1) throw new InvalidUrl(`invalid URL: ${JSON.stringify(url)}`);
        throw new ServerError(`${command} answered ${JSON.stringify(reply)} for one URL`);
    }

    async #batch(command, urls) {
        const list = Array.isArray(urls) ? urls : [...urls];
        if (list.length === 0) return [];
        const commands = [];
        for (let i = 0; i < list.length; i += URLS_PER_CALL) {
            commands.push([command, this.name, ...list.slice(i, i + URLS_PER_CALL)]);
        }
        const replies = await this.#client.pipeline(commands);
        const out = new Array(list.length);
        let k = 0;
        for (const reply of replies) {
            for (const n of value(reply)) out[k++] = n === -1 ? null : n === 1;
        }
        if (k !== list.length) throw new ServerError(`${command} answered ${k} items for ${list.length} URLs`);
        return out;
    }

    /** `Namespace.seen` on the server (`URL.SEEN`). */
    seen(url) {
        return this.#single('URL.SEEN', url);
    }

    /** `Namespace.seenMany`: `URL.SEEN` calls of up to 512 URLs in one pipeline; `null` for an invalid URL. */
    seenMany(urls) {
        return this.#batch('URL.SEEN', urls);
    }

    contains(url) {
        return this.#single('URL.CHECK', url);
    }

    containsMany(urls) {
        return this.#batch('URL.CHECK', urls);
    }

    forget(url) {
        return this.#single('URL.FORGET', url);
    }

    forgetMany(urls) {
        return this.#batch('URL.FORGET', urls);
    }

    /** `URL.FORGET ns HOST host`: how many URLs of the host were forgotten. */
    forgetHost(host) {
        return this.#client.command('URL.FORGET', this.name, 'HOST', host);
    }

    /** `URL.FORGET ns PREFIX prefix`: how many URLs under the prefix were forgotten. */
    forgetPrefix(prefix) {
        return this.#client.command('URL.FORGET', this.name, 'PREFIX', prefix);
    }

    /** The `URL.INFO` map. */
    async stats() {
        const info = await this.#client.command('URL.INFO', this.name);
        if (info === null || typeof info !== 'object' || Array.isArray(info)) throw new ServerError('URL.INFO did not answer a map');
        return info;
    }

    /** Distinct URLs recorded (`URL.INFO`'s `count`). */
    async size() {
        return (await this.stats()).count;
    }

    expire(seconds) {
        return this.#client.expire(this.name, seconds);
    }

    persist() {
        return this.#client.persist(this.name);
    }

    ttl() {
        return this.#client.ttl(this.name);
    }
}

module.exports = { Client, RemoteNamespace, parse, encode };
