// Transactions from Node.js clients against `urlseen serve`: ioredis' `multi().exec()` and
// node-redis' `multi().exec()`, both MULTI/EXEC on the wire, plus `watch` with a write by another
// client. Run by crates/server/tests/compat.rs, which installs both packages with npm first:
//
//     URLSEEN_PORT=6380 NODE_PATH=<dir>/node_modules node tests/compat/node_multi.js
//
// Exits 0 and prints "node clients: OK" when every check passes.

"use strict";

const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { createClient } = require("redis");

const port = Number(process.env.URLSEEN_PORT || "6380");
const host = process.env.URLSEEN_HOST || "127.0.0.1";

async function ioredis() {
  const r = new Redis({ host, port, lazyConnect: true, maxRetriesPerRequest: 1 });
  await r.connect();
  try {
    await r.del("node:io", "node:iou");
    const replies = await r
      .multi()
      .call("BF.ADD", "node:io", "a")
      .call("BF.ADD", "node:io", "a")
      .call("URL.SEEN", "node:iou", "https://a.example/", "HTTPS://A.EXAMPLE:443/")
      .ping()
      .exec();
    // ioredis answers [error, reply] pairs.
    assert.deepEqual(replies, [[null, 1], [null, 0], [null, [0, 1]], [null, "PONG"]]);
    // A queueing error aborts: exec rejects with EXECABORT.
    await assert.rejects(
      r.multi().call("BF.ADD", "node:io", "b").call("NO.SUCH.COMMAND").exec(),
      /EXECABORT/,
    );
    assert.equal(await r.call("BF.EXISTS", "node:io", "b"), 0);
    // WATCH, another client writes, EXEC answers null.
    const other = new Redis({ host, port });
    await r.watch("node:io");
    await other.call("BF.ADD", "node:io", "c");
    assert.equal(await r.multi().call("BF.ADD", "node:io", "d").exec(), null);
    other.disconnect();
  } finally {
    r.disconnect();
  }
}

async function nodeRedis() {
  const r = createClient({ socket: { host, port } });
  r.on("error", () => {});
  await r.connect();
  try {
    await r.del(["node:nr", "node:nru"]);
    const replies = await r
      .multi()
      .sendCommand(["BF.ADD", "node:nr", "a"])
      .sendCommand(["BF.ADD", "node:nr", "a"])
      .sendCommand(["URL.SEEN", "node:nru", "https://a.example/"])
      .ping()
      .exec();
    // BF.ADD is a boolean when node-redis speaks RESP3, an integer in RESP2.
    const normalized = replies.map((x) => (typeof x === "boolean" ? Number(x) : x));
    assert.deepEqual(normalized, [1, 0, [0], "PONG"]);
    // WATCH, another client writes: exec rejects with node-redis' WatchError.
    const other = r.duplicate();
    other.on("error", () => {});
    await other.connect();
    await r.watch("node:nr");
    await other.sendCommand(["BF.ADD", "node:nr", "c"]);
    await assert.rejects(r.multi().sendCommand(["BF.ADD", "node:nr", "d"]).exec(), (e) =>
      /watch/i.test(`${e.name} ${e.message}`),
    );
    assert.equal(Number(await r.sendCommand(["BF.EXISTS", "node:nr", "d"])), 0);
    await other.quit();
  } finally {
    await r.quit();
  }
}

(async () => {
  await ioredis();
  console.log("ioredis: OK");
  await nodeRedis();
  console.log("node-redis: OK");
  console.log("node clients: OK");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
