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
    expect(await loader.available()).toBe(true);
    expect(await loader.load()).toBe(module);
    expect(await loader.available()).toBe(true);
    expect(imports).toBe(1);
  });

  it('caches a failed import too, and explains how to install the package', async () => {
    let imports = 0;
    const cause = new Error("Cannot find package 'testcontainers' imported from /x/dist/index.js");
    const loader = createTestcontainersLoader(async () => {
      imports += 1;
      throw cause;
    });
    expect(await loader.available()).toBe(false);
    const error: unknown = await loader.load().catch((e: unknown) => e);
    expect(await loader.available()).toBe(false);
    expect(imports).toBe(1);
    expect(isEtcdHarnessError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'ETCD_UNAVAILABLE', cause });
    const message = (error as Error).message;
    expect(message).toMatch(/optional peer dependency testcontainers \(~12\.0\.4\)/);
    expect(message).toMatch(/Cannot find package 'testcontainers'/);
    expect(message).toMatch(/pnpm add -D testcontainers@~12\.0\.4/);
  });
});
