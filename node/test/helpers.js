// What the tests share: a free port, `urlseen serve` (the package's own bin) on one, a
// temporary directory, and a crawl in a child process (crawl.js).
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const BIN = path.join(__dirname, '..', 'bin', 'urlseen.js');

function tmpdir(t) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'urlseen-node-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    return dir;
}

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

function canConnect(port) {
    return new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port });
        s.once('connect', () => {
            s.destroy();
            resolve(true);
        });
        s.once('error', () => resolve(false));
    });
}

/** `urlseen serve` on a free port (in memory, or on `data`); `stop()` sends SIGTERM. */
async function startServer(dir, { data } = {}) {
    const port = await freePort();
    const args = [BIN, 'serve', '--resp', `127.0.0.1:${port}`, '--http', 'off'];
    if (data) args.push('--data', data);
    else args.push('--spill-dir', dir);
    const log = fs.openSync(path.join(dir, `serve-${port}.log`), 'w');
    const proc = spawn(process.execPath, args, { stdio: ['ignore', log, log] });
    const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve(code ?? signal)));
    const deadline = Date.now() + 30_000;
    while (!(await canConnect(port))) {
        if (proc.exitCode !== null) throw new Error(`urlseen serve exited at start: ${fs.readFileSync(path.join(dir, `serve-${port}.log`), 'utf8')}`);
        if (Date.now() > deadline) throw new Error('urlseen serve did not start in 30 s');
        await new Promise((r) => setTimeout(r, 50));
    }
    return {
        port,
        url: `redis://127.0.0.1:${port}`,
        /** SIGTERM, as an operator would; resolves with the exit code. */
        async stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
            const code = await exited;
            fs.closeSync(log);
            return code;
        },
    };
}

/** Starts a crawl (crawl.js) in a child process; `done` resolves with its report. */
function startCrawl(opts) {
    const child = spawn(process.execPath, [path.join(__dirname, 'crawl.js'), JSON.stringify(opts)], {
        stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const done = new Promise((resolve, reject) => {
        child.once('exit', (code, signal) => {
            if (code !== 0) {
                reject(Object.assign(new Error(`crawl exited with ${code ?? signal}: ${err.slice(-4000)}`), { code, signal }));
                return;
            }
            resolve(JSON.parse(out.trim().split('\n').pop()));
        });
    });
    return { child, done };
}

module.exports = { BIN, tmpdir, freePort, startServer, startCrawl };
