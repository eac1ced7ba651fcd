import { describeFenceConformance } from '@leasehold/fence/conformance';
import { memoryStore, type MemoryState } from '@leasehold/fence/memory';

const state: MemoryState = new Map();
describeFenceConformance('memory (built package)', () => ({
  store: memoryStore(state),
  reopen: async () => memoryStore(state),
}));
