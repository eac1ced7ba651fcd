import { describeFenceConformance } from '@leasehold/fence/conformance';
import { MemoryStore, type MemoryState } from '@leasehold/fence/memory';

const state: MemoryState = new Map();
describeFenceConformance('memory (built package)', () => ({
  store: new MemoryStore(state),
  reopen: async () => new MemoryStore(state),
}));
