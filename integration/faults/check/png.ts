import { inflateSync } from 'node:zlib';

export interface PngInfo {
  width: number;
  height: number;
  /** Distinct RGB colours among the sampled pixels (every `stride`-th pixel of every row). */
  distinctColours: number;
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * Decodes an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes) just far enough to
 * count its colours: enough to tell a rendered page from a blank one.
 */
export function inspectPng(data: Buffer, stride = 1): PngInfo {
  if (data.length < 33 || !data.subarray(0, 8).equals(SIGNATURE)) throw new Error('not a PNG file');
  let offset = 8;
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  while (offset + 8 <= data.length) {
    const length = data.readUInt32BE(offset);
    const type = data.toString('latin1', offset + 4, offset + 8);
    const body = data.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const depth = body[8];
      const colourType = body[9];
      const interlace = body[12];
      if (depth !== 8 || (colourType !== 2 && colourType !== 6) || interlace !== 0) {
        throw new Error(
          `unsupported PNG: depth ${depth}, colour type ${colourType}, interlace ${interlace}`,
        );
      }
      channels = colourType === 6 ? 4 : 3;
    } else if (type === 'IDAT') {
      idat.push(body);
    } else if (type === 'IEND') {
      break;
    }
    offset += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const rowBytes = width * channels;
  let previous = Buffer.alloc(rowBytes);
  const colours = new Set<number>();
  for (let y = 0; y < height; y++) {
    const start = y * (rowBytes + 1);
    const filter = raw[start];
    const row = Buffer.from(raw.subarray(start + 1, start + 1 + rowBytes));
    for (let i = 0; i < rowBytes; i++) {
      const left = i >= channels ? (row[i - channels] ?? 0) : 0;
      const up = previous[i] ?? 0;
      const upLeft = i >= channels ? (previous[i - channels] ?? 0) : 0;
      const value = row[i] ?? 0;
      row[i] =
        filter === 1
          ? value + left
          : filter === 2
            ? value + up
            : filter === 3
              ? value + ((left + up) >> 1)
              : filter === 4
                ? value + paeth(left, up, upLeft)
                : value;
    }
    for (let x = 0; x < width; x += stride) {
      const p = x * channels;
      colours.add(((row[p] ?? 0) << 16) | ((row[p + 1] ?? 0) << 8) | (row[p + 2] ?? 0));
    }
    previous = row;
  }
  return { width, height, distinctColours: colours.size };
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}
