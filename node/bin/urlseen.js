#!/usr/bin/env node
// The `urlseen` command (crates/cli), from the native addon: `npx urlseen serve`, as the
// Python wheel's console script. It runs on this thread until the command ends.
'use strict';

const { main } = require('../native.js');

// Node's own handlers of SIGTERM and SIGINT re-raise the signal after resetting the terminal,
// and `urlseen serve` (whose handler runs first) would take that for a second signal and exit
// at once with status 130. A listener here replaces them with libuv's, which only notes the
// signal (for this blocked event loop: never read), so `serve` shuts down cleanly and exits 0.
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => {});

process.exitCode = main(['urlseen', ...process.argv.slice(2)]);
