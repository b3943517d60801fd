// Drives layerbloom with node-redis's Bloom filter commands (`client.bf.*`, @redis/bloom), as
// an application does, over RESP2 and RESP3.
//
// Run by tests/clients.rs against a server it starts (or $REDIS_URL), with the client it
// installs under target/ from tests/clients/node/package.json:
//
//     LAYERBLOOM_NODE_MODULES=<dir with node_modules> node node_redis_bf.mjs <url> <key prefix>
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
    // bf.reserve, with each option.
    check(tag('reserve'), await client.bf.reserve(k('plain'), 0.01, 1000), 'OK');
    check(tag('reserve EXPANSION'), await client.bf.reserve(k('wide'), 0.001, 500, { EXPANSION: 4 }), 'OK');
    check(tag('reserve NONSCALING'), await client.bf.reserve(k('fixed'), 0.01, 3, { NONSCALING: true }), 'OK');
    await rejects(tag('reserve of an existing key'), client.bf.reserve(k('plain'), 0.01, 10), 'ERR item exists');
    await rejects(tag('reserve with a bad error rate'), client.bf.reserve(k('bad'), 2, 10),
      'ERR error rate must be in the range (0.000000, 1.000000)');

    // Adds and lookups.
    check(tag('add new'), await client.bf.add(k('plain'), 'alice'), true);
    check(tag('add again'), await client.bf.add(k('plain'), 'alice'), false);
    check(tag('mAdd'), await client.bf.mAdd(k('plain'), ['bob', 'carol', 'alice']), [true, true, false]);
    check(tag('exists'), await client.bf.exists(k('plain'), 'bob'), true);
    check(tag('exists absent'), await client.bf.exists(k('plain'), 'zed'), false);
    check(tag('exists missing key'), await client.bf.exists(k('missing'), 'a'), false);
    check(tag('mExists'), await client.bf.mExists(k('plain'), ['alice', 'zed', 'carol']), [true, false, true]);
    check(tag('card'), await client.bf.card(k('plain')), 3);
    check(tag('card missing key'), await client.bf.card(k('missing')), 0);

    // bf.insert with every option, NOCREATE, and a full non-scaling filter.
    check(tag('insert'), await client.bf.insert(k('plain'), ['dave', 'alice']), [true, false]);
    check(tag('insert options'), await client.bf.insert(k('ins'), ['a', 'b', 'a'],
      { CAPACITY: 50, ERROR: 0.001, EXPANSION: 3 }), [true, true, false]);
    check(tag('insert NONSCALING'), await client.bf.insert(k('ins-fixed'), ['x'],
      { CAPACITY: 2, NONSCALING: true }), [true]);
    await rejects(tag('insert NOCREATE'), client.bf.insert(k('nocreate'), ['a'], { NOCREATE: true }),
      'ERR not found');
    check(tag('mAdd filling'), await client.bf.mAdd(k('fixed'), ['1', '2', '3']), [true, true, true]);
    await rejects(tag('add to a full filter'), client.bf.add(k('fixed'), '4'), 'ERR non scaling filter is full');
    check(tag('add of a held item to a full filter'), await client.bf.add(k('fixed'), '1'), false);
    await rejects(tag('add to a string key'), (async () => {
      await client.set(k('str'), 'v');
      return client.bf.add(k('str'), 'a');
    })(), 'WRONGTYPE Operation against a key holding the wrong kind of value');

    // bf.info: the five fields, by the names @redis/bloom reads.
    check(tag('info'), plain(await client.bf.info(k('ins'))), {
      'Capacity': 50,
      'Size': plain(await client.bf.info(k('ins'))).Size,
      'Number of filters': 1,
      'Number of items inserted': 2,
      'Expansion rate': 3,
    });
    const ins = plain(await client.bf.info(k('ins')));
    check(tag('info Size is a positive number'), typeof ins.Size === 'number' && ins.Size > 0, true);
    check(tag('info of a non-scaling filter'), plain(await client.bf.info(k('fixed'))), {
      'Capacity': 3,
      'Size': plain(await client.bf.info(k('fixed'))).Size,
      'Number of filters': 1,
      'Number of items inserted': 3,
      'Expansion rate': null,
    });
    check(tag('info field names, in order'), Object.keys(plain(await client.bf.info(k('plain')))),
      ['Capacity', 'Size', 'Number of filters', 'Number of items inserted', 'Expansion rate']);
    await rejects(tag('info of a missing key'), client.bf.info(k('missing')), 'ERR not found');

    // A scaling filter grown over several layers, copied with scanDump / loadChunk (binary
    // chunks: read as Buffers).
    const items = Array.from({ length: 3000 }, (_, i) => `item-${i}`);
    for (let i = 0; i < items.length; i += 500) {
      const added = await client.bf.mAdd(k('big'), items.slice(i, i + 500));
      check(tag(`mAdd batch ${i}`), added.length, 500);
    }
    const bytes = client.withTypeMapping({ [RESP_TYPES.BLOB_STRING]: Buffer });
    const chunks = [];
    let iterator = 0;
    for (let n = 0; n < 1000; n += 1) {
      const { iterator: next, chunk } = await bytes.bf.scanDump(k('big'), iterator);
      if (next === 0) {
        check(tag('scanDump ends with an empty chunk'), chunk.length, 0);
        break;
      }
      check(tag('scanDump chunk is binary'), Buffer.isBuffer(chunk), true);
      chunks.push([next, chunk]);
      iterator = next;
    }
    check(tag('scanDump header then layers'), chunks.length >= 2, true);
    for (const [it, chunk] of chunks) {
      check(tag(`loadChunk ${it}`), await client.bf.loadChunk(k('copy'), it, chunk), 'OK');
    }
    check(tag('copy holds every item'), (await client.bf.mExists(k('copy'), items)).every((b) => b), true);
    const probes = Array.from({ length: 2000 }, (_, i) => `absent-${i}`);
    check(tag('copy answers absent items as the original'), await client.bf.mExists(k('copy'), probes),
      await client.bf.mExists(k('big'), probes));
    const big = plain(await client.bf.info(k('big')));
    check(tag('copy info'), plain(await client.bf.info(k('copy'))), big);
    check(tag('grown over several layers'), big['Number of filters'] >= 3, true);
    check(tag('copy card'), await client.bf.card(k('copy')), await client.bf.card(k('big')));
    check(tag('card counts the adds'), await client.bf.card(k('big')), big['Number of items inserted']);
  } finally {
    const keys = await client.keys(`${PREFIX}:resp${resp}:*`);
    if (keys.length > 0) {
      await client.del(keys);
    }
    await (client.close ? client.close() : client.quit());
  }
}

await runProtocols(run);
