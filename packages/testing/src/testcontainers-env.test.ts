import { describe, expect, it } from 'vitest';
import { applyTestcontainersDefaults } from './testcontainers-env.js';

describe('applyTestcontainersDefaults', () => {
  it('fills in only what is unset', () => {
    const env: NodeJS.ProcessEnv = { TESTCONTAINERS_RYUK_DISABLED: 'false' };
    applyTestcontainersDefaults({ dockerHost: 'unix:///run/podman/podman.sock' }, env);
    expect(env).toEqual({
      DOCKER_HOST: 'unix:///run/podman/podman.sock',
      TESTCONTAINERS_RYUK_DISABLED: 'false',
      TESTCONTAINERS_HOST_OVERRIDE: '127.0.0.1',
    });
  });
});
