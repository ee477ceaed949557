// The error classes urlseen throws, and the one mapping of error codes (the native addon's,
// src/errors.rs) and server replies (client.js) to them.
//
//   UrlseenError          base of everything urlseen throws (code URLSEEN_ERROR)
//   ├── InvalidUrl        a URL, host or prefix that is not one (single calls; batches say null)
//   ├── InvalidOption     a bad capacity, fpr, profile, fsync or namespace name
//   ├── ForgetUnsupported forget on a namespace that cannot (no counting filters, no kept URLs)
//   ├── Locked            the data directory is open in another process
//   ├── StorageError      a file could not be read or written, or is damaged
//   ├── Closed            a call on a closed Db or Client
//   ├── ServerError       `urlseen serve` answered an error (for example -MISCONF)
//   └── ConnectionFailed  `urlseen serve` could not be reached, or the connection broke
'use strict';

class UrlseenError extends Error {
    constructor(message, code = 'URLSEEN_ERROR') {
        super(message);
        this.name = new.target.name;
        this.code = code;
    }
}

function subclass(name, code) {
    const cls = {
        [name]: class extends UrlseenError {
            constructor(message) {
                super(message, code);
            }
        },
    }[name];
    return cls;
}

const InvalidUrl = subclass('InvalidUrl', 'URLSEEN_INVALID_URL');
const InvalidOption = subclass('InvalidOption', 'URLSEEN_INVALID_OPTION');
const ForgetUnsupported = subclass('ForgetUnsupported', 'URLSEEN_FORGET_UNSUPPORTED');
const Locked = subclass('Locked', 'URLSEEN_LOCKED');
const StorageError = subclass('StorageError', 'URLSEEN_STORAGE');
const Closed = subclass('Closed', 'URLSEEN_CLOSED');
const ServerError = subclass('ServerError', 'URLSEEN_SERVER');
const ConnectionFailed = subclass('ConnectionFailed', 'URLSEEN_CONNECTION');

const BY_CODE = new Map(
    [InvalidUrl, InvalidOption, ForgetUnsupported, Locked, StorageError, Closed, ServerError, ConnectionFailed].map(
        (cls) => [new cls('').code, cls],
    ),
);

/** A native error with a urlseen code as its class; any other error as it is. */
function fromNative(err) {
    if (err instanceof UrlseenError || !err || typeof err.code !== 'string') return err;
    if (err.code === 'URLSEEN_ERROR') return new UrlseenError(err.message);
    const cls = BY_CODE.get(err.code);
    return cls ? new cls(err.message) : err;
}

/** An error reply of `urlseen serve` as its class, by the text crates/server/src/error.rs gives it. */
function fromReply(message) {
    const has = (...parts) => parts.some((p) => message.includes(p));
    if (has('cannot forget', 'whose host is unknown', 'host hash')) return new ForgetUnsupported(message);
    if (has('invalid host', 'invalid prefix', 'invalid URL')) return new InvalidUrl(message);
    if (has('unknown profile', 'bad capacity', 'bad error rate', 'invalid option', 'invalid namespace name', 'bad recrawl', 'bad generations', 'bad TTL')) {
        return new InvalidOption(message);
    }
    return new ServerError(message);
}

module.exports = {
    UrlseenError,
    InvalidUrl,
    InvalidOption,
    ForgetUnsupported,
    Locked,
    StorageError,
    Closed,
    ServerError,
    ConnectionFailed,
    fromNative,
    fromReply,
};
