import { describe, expect, it } from 'vitest';
import { CLUSTER_LABEL, labelsFor, RUN_LABEL } from './container-provider.js';

describe('labelsFor', () => {
  it('labels the cluster, and the CI run when LEASEHOLD_TEST_RUN_ID is set', () => {
    expect(labelsFor('tok', {})).toEqual({ [CLUSTER_LABEL]: 'tok' });
    expect(labelsFor('tok', { LEASEHOLD_TEST_RUN_ID: 'ci-1' })).toEqual({
      [CLUSTER_LABEL]: 'tok',
      [RUN_LABEL]: 'ci-1',
    });
  });
});
