#!/usr/bin/env node
// The `urlseen` command (crates/cli), from the native addon: `npx urlseen serve`, as the
// Python wheel's console script. It runs on this thread until the command ends.
'use strict';

const { main } = require('../native.js');

process.exitCode = main(['urlseen', ...process.argv.slice(2)]);
