// A generated web site for the crawl tests and the crawl benchmark, served by node:http on a
// free loopback port: the Node port of python/tests/site_gen.py (the same link spellings,
// without the POST forms, which Crawlee's link crawl does not submit).
//
// Pages link to each other in the spellings real sites mix (fragments, reordered or repeated
// query arguments, blank values, percent-escapes, `+` for a space, an upper-case scheme,
// relative and absolute forms). Every GET the server answers is recorded by its raw path.
'use strict';

const http = require('node:http');

/** A small seeded generator (mulberry32), so that a seed gives the same site every time. */
function rng(seed) {
    let a = seed >>> 0;
    const next = () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    return { below: (n) => Math.floor(next() * n), sample: (xs, k) => {
        const pool = [...xs];
        const out = [];
        for (let i = 0; i < k; i++) out.push(pool.splice(Math.floor(next() * pool.length), 1)[0]);
        return out;
    } };
}

function links(r, i, n, port) {
    const host = `127.0.0.1:${port}`;
    const out = [`/p/${(i + 1) % n}.html`]; // every page is reachable from the first
    for (let round = 0; round < 6; round++) {
        const j = r.below(n);
        const q = r.below(Math.max(1, Math.floor(n / 4)));
        out.push(
            ...r.sample(
                [
                    `/p/${j}.html`,
                    `${j}.html`,
                    `../p/${j}.html`,
                    `http://${host}/p/${j}.html`,
                    `HTTP://${host}/p/${j}.html#top`,
                    `/p/${j}.html#section-${r.below(3)}`,
                    `/q/${q}.html?b=2&a=1`,
                    `/q/${q}.html?a=1&b=2`,
                    `/q/${q}.html?a=1&b=2#x`,
                    `/q/${q}.html?k=2&k=1`,
                    `/q/${q}.html?k=1&k=2`,
                    `/q/${q}.html?s=a+b`,
                    `/q/${q}.html?s=a%20b`,
                    `/q/${q}.html?blank=`,
                    `/q/${q}.html?blank`,
                    `/u/~${q}.html`,
                    `/u/%7E${q}.html`,
                    `/u/%7e${q}.html`,
                ],
                3,
            ),
        );
    }
    return out;
}

/** The pages: decoded path → HTML. */
function generate(pages, seed, port) {
    const r = rng(seed);
    const site = new Map();
    site.set('/index.html', '<html><body><a href="/p/0.html">start</a> <a href="mailto:x@example.com">mail</a></body></html>');
    for (let i = 0; i < pages; i++) {
        const a = links(r, i, pages, port).map((h, k) => `<a href="${h}">${k}</a>\n`).join('');
        site.set(`/p/${i}.html`, `<html><body><h1>${i}</h1>\n${a}</body></html>`);
    }
    for (let i = 0; i < Math.max(1, Math.floor(pages / 4)); i++) {
        const body = `<html><body><a href="/p/${r.below(pages)}.html">back</a></body></html>`;
        site.set(`/q/${i}.html`, body);
        site.set(`/u/~${i}.html`, body);
    }
    return site;
}

/**
 * The site on a free loopback port. `requests` lists the raw paths answered; `hold()` makes
 * it stop answering (requests wait, unanswered and unrecorded) until `release()`, which ends
 * them without an answer.
 */
class Site {
    constructor(pages = 1200, seed = 7) {
        this.pages = pages;
        this.seed = seed;
        this.requests = [];
        this.held = [];
        this.holding = false;
        this.server = http.createServer((req, res) => this.#answer(req, res));
        this.server.keepAliveTimeout = 60_000;
    }

    async start() {
        await new Promise((resolve) => this.server.listen(0, '127.0.0.1', resolve));
        this.port = this.server.address().port;
        this.site = generate(this.pages, this.seed, this.port);
        this.origin = `http://127.0.0.1:${this.port}`;
        this.url = `${this.origin}/index.html`;
        return this;
    }

    #answer(req, res) {
        if (this.holding) {
            this.held.push(res);
            return;
        }
        let path;
        try {
            path = decodeURIComponent(new URL(req.url, this.origin).pathname);
        } catch {
            path = null;
        }
        const body = path === null ? undefined : this.site.get(path);
        this.requests.push(req.url);
        if (body === undefined) {
            res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
            return;
        }
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body) });
        res.end(body);
    }

    /** The requests answered since the last call. */
    take() {
        const out = this.requests;
        this.requests = [];
        return out;
    }

    hold() {
        this.holding = true;
    }

    /** Answers again; the requests held meanwhile are ended without an answer. */
    release() {
        this.holding = false;
        for (const res of this.held.splice(0)) res.socket?.destroy();
    }

    async close() {
        this.release();
        this.server.closeAllConnections();
        await new Promise((resolve) => this.server.close(resolve));
    }
}

module.exports = { Site, generate };
