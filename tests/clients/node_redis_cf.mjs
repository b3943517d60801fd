// Drives layerbloom with node-redis's cuckoo filter commands (`client.cf.*`, @redis/bloom), as
// an application does, over RESP2 and RESP3. node-redis has no CF.MEXISTS.
//
// Run by tests/clients.rs against a server it starts (or $REDIS_URL), with the client it
// installs under target/ from tests/clients/node/package.json:
//
//     LAYERBLOOM_NODE_MODULES=<dir with node_modules> node node_redis_cf.mjs <url> <key prefix>
//
// Reports as tests/clients/checks.mjs says. Every key it makes starts with the prefix and is
// deleted at the end.

import { RESP_TYPES, URL, PREFIX, createClient, check, plain, rejects, runProtocols } from './checks.mjs';

async function run(resp) {
  const client = createClient({ url: URL, RESP: resp });
  client.on('error', (e) => console.log(`client error: ${e}`));
  await client.connect();
  const k = (name) => `${PREFIX}:resp${resp}:${name}`;
  const tag = (what) => `RESP${resp} ${what}`;
  try {
    // cf.reserve, with each option.
    check(tag('reserve'), await client.cf.reserve(k('plain'), 1000), 'OK');
    check(tag('reserve options'), await client.cf.reserve(k('opts'), 1000,
      { BUCKETSIZE: 4, MAXITERATIONS: 10, EXPANSION: 2 }), 'OK');
    await rejects(tag('reserve of an existing key'), client.cf.reserve(k('plain'), 10), 'ERR item exists');
    await rejects(tag('reserve with bucket size 0'), client.cf.reserve(k('bad'), 10, { BUCKETSIZE: 0 }),
      'BUCKETSIZE: value must be an integer between 1 and 255, inclusive.');

    // Adds, lookups, counts and deletes.
    check(tag('add'), await client.cf.add(k('plain'), 'alice'), true);
    check(tag('add again (duplicates allowed)'), await client.cf.add(k('plain'), 'alice'), true);
    check(tag('addNX of a held item'), await client.cf.addNX(k('plain'), 'alice'), false);
    check(tag('addNX of a new item'), await client.cf.addNX(k('plain'), 'bob'), true);
    check(tag('exists'), await client.cf.exists(k('plain'), 'bob'), true);
    check(tag('exists absent'), await client.cf.exists(k('plain'), 'zed'), false);
    check(tag('exists missing key'), await client.cf.exists(k('missing'), 'a'), false);
    check(tag('count twice added'), await client.cf.count(k('plain'), 'alice'), 2);
    check(tag('count absent'), await client.cf.count(k('plain'), 'zed'), 0);
    check(tag('count missing key'), await client.cf.count(k('missing'), 'a'), 0);
    check(tag('del'), await client.cf.del(k('plain'), 'alice'), true);
    check(tag('count after del'), await client.cf.count(k('plain'), 'alice'), 1);
    check(tag('del absent'), await client.cf.del(k('plain'), 'zed'), false);
    await rejects(tag('del on a missing key'), client.cf.del(k('missing'), 'a'), 'Not found');

    // insert / insertNX with options, NOCREATE.
    check(tag('insert creates'), await client.cf.insert(k('ins'), ['a', 'b', 'a']), [true, true, true]);
    check(tag('insert CAPACITY'), await client.cf.insert(k('cap'), ['x'], { CAPACITY: 100 }), [true]);
    // CF.INSERTNX answers integers over RESP3 (RedisBloom's replies, kept), which node-redis
    // passes through; over RESP2 it maps them to booleans.
    const nx = (bits) => bits.map((b) => (resp === 2 ? b === 1 : b));
    check(tag('insertNX'), await client.cf.insertNX(k('ins'), ['a', 'c', 'c']), nx([0, 1, 0]));
    check(tag('insertNX NOCREATE'), await client.cf.insertNX(k('ins'), ['d'], { NOCREATE: true }), nx([1]));
    await rejects(tag('insert NOCREATE on a missing key'),
      client.cf.insert(k('nocreate'), ['a'], { NOCREATE: true }), 'ERR not found');
    await rejects(tag('add to a string key'), (async () => {
      await client.set(k('str'), 'v');
      return client.cf.add(k('str'), 'a');
    })(), 'WRONGTYPE Operation against a key holding the wrong kind of value');

    // cf.info: RedisBloom's eight fields, by the names @redis/bloom reads, in order.
    const opts = plain(await client.cf.info(k('opts')));
    check(tag('info'), opts, {
      'Size': opts.Size,
      'Number of buckets': 256,
      'Number of filters': 1,
      'Number of items inserted': 0,
      'Number of items deleted': 0,
      'Bucket size': 4,
      'Expansion rate': 2,
      'Max iterations': 10,
    });
    check(tag('info Size is a positive number'), typeof opts.Size === 'number' && opts.Size > 0, true);
    check(tag('info field names, in order'), Object.keys(plain(await client.cf.info(k('plain')))), [
      'Size', 'Number of buckets', 'Number of filters', 'Number of items inserted',
      'Number of items deleted', 'Bucket size', 'Expansion rate', 'Max iterations']);
    const counted = plain(await client.cf.info(k('plain')));
    check(tag('info counts adds and deletes'),
      [counted['Number of items inserted'], counted['Number of items deleted']], [2, 1]);
    await rejects(tag('info of a missing key'), client.cf.info(k('missing')), 'ERR not found');

    // A filter grown over several sub-filters, copied with scanDump / loadChunk (binary
    // chunks: read as Buffers).
    check(tag('reserve small'), await client.cf.reserve(k('big'), 500, { EXPANSION: 1 }), 'OK');
    const items = Array.from({ length: 3000 }, (_, i) => `item-${i}`);
    for (let i = 0; i < items.length; i += 500) {
      const added = await client.cf.insert(k('big'), items.slice(i, i + 500));
      check(tag(`insert batch ${i}`), added.every((b) => b === true) && added.length === 500, true);
    }
    for (const item of items.slice(0, 50)) {
      await client.cf.del(k('big'), item);
    }
    const bytes = client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
    const chunks = [];
    let iterator = 0;
    for (let n = 0; n < 10000; n += 1) {
      const { iterator: next, chunk } = await bytes.cf.scanDump(k('big'), iterator);
      if (next === 0) {
        check(tag('scanDump ends with no chunk'), chunk === null || chunk.length === 0, true);
        break;
      }
      check(tag('scanDump chunk is binary'), Buffer.isBuffer(chunk), true);
      chunks.push([next, chunk]);
      iterator = next;
    }
    check(tag('scanDump header then sub-filters'), chunks.length >= 2, true);
    for (const [it, chunk] of chunks) {
      check(tag(`loadChunk ${it}`), await client.cf.loadChunk(k('copy'), it, chunk), 'OK');
    }
    const big = plain(await client.cf.info(k('big')));
    check(tag('grown over several sub-filters'), big['Number of filters'] >= 2, true);
    check(tag('copy info'), plain(await client.cf.info(k('copy'))), big);
    let same = true;
    for (const item of items.slice(0, 200).concat(['absent-1', 'absent-2', 'absent-3'])) {
      const [a, b] = [await client.cf.count(k('copy'), item), await client.cf.count(k('big'), item)];
      same &&= a === b;
    }
    check(tag('copy counts as the original'), same, true);
    check(tag('copy holds a kept item'), await client.cf.exists(k('copy'), 'item-2999'), true);
  } finally {
    const keys = await client.keys(`${PREFIX}:resp${resp}:*`);
    if (keys.length > 0) {
      await client.del(keys);
    }
    await (client.close ? client.close() : client.quit());
  }
}

await runProtocols(run);
