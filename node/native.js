// The native addon, built by `npm install` (scripts/build.js).
'use strict';

const path = require('node:path');

try {
    module.exports = require(path.join(__dirname, 'urlseen.node'));
} catch (err) {
    if (err && err.code === 'MODULE_NOT_FOUND') {
        err.message = `urlseen: the native addon is not built (${err.message}); run \`npm install\` (or \`npm run build\`) in ${__dirname}`;
    }
    throw err;
}
