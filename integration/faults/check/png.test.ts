import { deflateSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { inspectPng } from './png.js';

function chunk(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(body.length, 0);
  head.write(type, 4, 'latin1');
  return Buffer.concat([head, body, Buffer.alloc(4)]); // the decoder does not check CRCs
}

/** A 3×3 RGB PNG whose rows use filters None, Sub and Up. */
function png(): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(3, 0);
  ihdr.writeUInt32BE(3, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  const rows = Buffer.from([
    0,
    255,
    0,
    0,
    0,
    255,
    0,
    0,
    0,
    255, // red, green, blue
    1,
    10,
    10,
    10,
    5,
    5,
    5,
    5,
    5,
    5, // Sub: (10,10,10), (15,15,15), (20,20,20)
    2,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0, // Up: a copy of the row above
  ]);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(rows)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

describe('inspectPng', () => {
  it('decodes size and counts colours through the row filters', () => {
    expect(inspectPng(png())).toEqual({ width: 3, height: 3, distinctColours: 6 });
  });

  it('refuses what is not a PNG', () => {
    expect(() =>
      inspectPng(Buffer.from('<html></html> and some more bytes to be long enough')),
    ).toThrow(/not a PNG/);
  });
});
