import type { EngineLocation } from './engine.js';

/**
 * Defaults testcontainers needs on machines like our CI (Podman, no registry), applied only
 * where the user set nothing, before the first testcontainers call (it reads them when called,
 * not when imported, so the provider probe may import it earlier):
 * - DOCKER_HOST: the engine we found; testcontainers does not look at /run/podman/podman.sock.
 * - TESTCONTAINERS_RYUK_DISABLED=true: the Ryuk reaper image would have to be pulled. Cleanup is
 *   ours instead: close(), and a teardown that removes containers labelled org.testcontainers=true.
 * - TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1: with /.dockerenv present testcontainers thinks it
 *   runs in a container and uses a bridge gateway (or pulls alpine to find one). With host
 *   networking every port is on 127.0.0.1 anyway.
 */
export function applyTestcontainersDefaults(
  engine: EngineLocation,
  env: NodeJS.ProcessEnv = process.env,
): void {
  env.DOCKER_HOST ??= engine.dockerHost;
  env.TESTCONTAINERS_RYUK_DISABLED ??= 'true';
  env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
}
