#!/usr/bin/env node
// Builds the native addon (urlseen.node) from the Rust sources: what `npm install` runs, in
// this folder or in a project that installs it (`npm install path/to/urlseen/node`).
//
// It runs cargo itself rather than @napi-rs/cli's `napi build`, which always passes
// `--target <host triple>`: cargo then builds into target/<triple>/<profile>/, a second copy of
// every dependency beside the one the workspace's own builds and tests use (on the CI machine,
// about ten minutes more for the same bytes). Here the addon is one more crate of the workspace
// build: `URLSEEN_CARGO_PROFILE=ci` (what scripts/check.sh sets) reuses what `cargo test
// --profile ci` just compiled. The default profile is `release`.
'use strict';

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const manifest = path.join(root, 'Cargo.toml');
const profile = process.env.URLSEEN_CARGO_PROFILE || 'release';

function cargo(args, options = {}) {
    const run = spawnSync('cargo', args, { cwd: root, ...options });
    if (run.error && run.error.code === 'ENOENT') {
        console.error('urlseen: building the native addon needs Rust (cargo) on PATH: https://rustup.rs, then `npm install` again');
        process.exit(1);
    }
    if (run.status !== 0) process.exit(run.status ?? 1);
    return run;
}

const metadata = JSON.parse(
    cargo(['metadata', '--format-version', '1', '--no-deps', '--manifest-path', manifest], {
        stdio: ['ignore', 'pipe', 'inherit'],
        maxBuffer: 64 << 20,
    }).stdout,
);
cargo(['build', '--manifest-path', manifest, '-p', 'urlseen-node', '--lib', '--profile', profile], { stdio: 'inherit' });

// Cargo names the profile `dev`'s directory `debug`.
const dir = path.join(metadata.target_directory, profile === 'dev' ? 'debug' : profile);
const lib = { win32: 'urlseen_node.dll', darwin: 'liburlseen_node.dylib' }[process.platform] ?? 'liburlseen_node.so';
const dest = path.join(root, 'urlseen.node');
// Copied to a temporary name and renamed: a process that has the old addon loaded keeps it.
fs.copyFileSync(path.join(dir, lib), `${dest}.tmp`);
fs.renameSync(`${dest}.tmp`, dest);
console.log(`urlseen: built ${path.relative(process.cwd(), dest) || dest} (cargo profile ${profile})`);
