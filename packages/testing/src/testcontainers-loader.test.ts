import { describe, expect, it } from 'vitest';
import { isEtcdHarnessError } from './errors.js';
import { createTestcontainersLoader, type Testcontainers } from './testcontainers-loader.js';

describe('createTestcontainersLoader', () => {
  it('imports once and caches the module', async () => {
    let imports = 0;
    const module = {} as Testcontainers;
    const loader = createTestcontainersLoader(async () => {
      imports += 1;
      return module;
    });
    expect(await loader.failure()).toBeUndefined();
    expect(await loader.load()).toBe(module);
    expect(await loader.failure()).toBeUndefined();
    expect(imports).toBe(1);
  });

  it('caches a failed import too, and explains how to install the package', async () => {
    let imports = 0;
    const cause = new Error("Cannot find package 'testcontainers' imported from /x/dist/index.js");
    const loader = createTestcontainersLoader(async () => {
      imports += 1;
      throw cause;
    });
    const failure = await loader.failure();
    const error: unknown = await loader.load().catch((e: unknown) => e);
    expect(await loader.failure()).toBe(failure);
    expect(error).toBe(failure);
    expect(imports).toBe(1);
    expect(isEtcdHarnessError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'ETCD_UNAVAILABLE', cause });
    const message = (error as Error).message;
    expect(message).toMatch(/optional peer dependency testcontainers \(>=12\.0\.0 <12\.0\.2\)/);
    expect(message).toMatch(/Cannot find package 'testcontainers'/);
    expect(message).toMatch(
      /Install it in the package that runs the tests: `pnpm add -D testcontainers@12\.0\.1`/,
    );
  });

  it('an installed testcontainers that throws on import is reported with its own error, as cause and in the message', async () => {
    // What testcontainers 12.0.4 does on Node 20: its undici 8 needs Node 22.
    const cause = new TypeError("Cannot read properties of undefined (reading 'bind')");
    const loader = createTestcontainersLoader(async () => {
      throw cause;
    });
    const error = await loader.failure();
    expect(error).toMatchObject({ code: 'ETCD_UNAVAILABLE', cause });
    expect(error?.message).toContain(
      "TypeError: Cannot read properties of undefined (reading 'bind')",
    );
    expect(error?.message).toMatch(/installed but throws on import/);
    expect(error?.message).not.toMatch(/Install it in the package/);
  });
});
