// What the node-redis client scripts share: the client module, the command line, the tally of
// checks, and the run over both protocols that reports it.
//
// A script imports it, defines `run(resp)` and ends with `await runProtocols(run)`, which
// prints one line per failed check and a closing 'N passed, N failed' line and exits 1 on any
// failure.

import { createRequire } from 'node:module';
import { deepStrictEqual } from 'node:assert';
import path from 'node:path';

const require = createRequire(path.join(process.env.LAYERBLOOM_NODE_MODULES, 'index.js'));
export const { createClient, RESP_TYPES } = require('redis');

export const [URL, PREFIX] = process.argv.slice(2);
const tally = { passed: 0, failed: 0 };

export function check(what, got, want) {
  try {
    deepStrictEqual(got, want);
    tally.passed += 1;
  } catch {
    fail(`${what}: got ${show(got)}, want ${show(want)}`);
  }
}

function fail(why) {
  tally.failed += 1;
  console.log(`FAILED: ${why}`);
}

export function show(v) {
  return JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? `${x}n` : x));
}

export async function rejects(what, promise, text) {
  try {
    const v = await promise;
    fail(`${what}: should fail with ${text}, got ${show(v)}`);
  } catch (e) {
    check(`${what} (error text)`, e.message, text);
  }
}

/// BF.INFO or CF.INFO as @redis/bloom parses it, as a plain object (RESP2: its own pairing of
/// the flat array; RESP3: the map).
export function plain(info) {
  return info instanceof Map ? Object.fromEntries(info) : { ...info };
}

export async function runProtocols(run) {
  try {
    await run(2);
    await run(3);
  } catch (e) {
    fail(`unexpected error: ${e?.stack ?? e}`);
  }
  console.log(`node-redis ${tally.passed} passed, ${tally.failed} failed`);
  process.exit(tally.failed === 0 ? 0 : 1);
}
