const BLOCK = 512;

/**
 * A ustar archive holding one regular file, for the engine's `PUT /containers/{id}/archive`
 * (which only takes tar). Names up to 100 bytes, sizes up to 8 GiB: enough for a snapshot.
 */
export function tarOneFile(name: string, content: Buffer, mode = 0o644): Buffer {
  if (Buffer.byteLength(name) > 100) throw new RangeError(`tar: name too long: ${name}`);
  const header = Buffer.alloc(BLOCK, 0);
  header.write(name, 0, 'utf8');
  header.write(octal(mode, 8), 100, 'ascii');
  header.write(octal(0, 8), 108, 'ascii'); // uid
  header.write(octal(0, 8), 116, 'ascii'); // gid
  header.write(octal(content.length, 12), 124, 'ascii');
  header.write(octal(Math.floor(Date.now() / 1000), 12), 136, 'ascii');
  header.fill(' ', 148, 156); // checksum is computed with this field as spaces
  header.write('0', 156, 'ascii'); // regular file
  header.write('ustar\0', 257, 'ascii');
  header.write('00', 263, 'ascii');
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  const padding = (BLOCK - (content.length % BLOCK)) % BLOCK;
  // Two zero blocks end the archive.
  return Buffer.concat([header, content, Buffer.alloc(padding + 2 * BLOCK, 0)]);
}

/** `width - 1` octal digits and a NUL, as tar numeric fields are. */
function octal(value: number, width: number): string {
  const digits = value.toString(8);
  if (digits.length > width - 1) throw new RangeError(`tar: ${value} does not fit`);
  return `${digits.padStart(width - 1, '0')}\0`;
}
