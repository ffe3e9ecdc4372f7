import { freshSchema, serviceUrl, skipReason } from '../../test/services.ts';
import { storeConformance } from './conformance.ts';
import { PostgresStore } from './postgres.ts';

storeConformance(
  'PostgreSQL',
  async () => {
    const { schema, drop } = freshSchema();
    const store = await PostgresStore.open(serviceUrl('DATABASE_URL') as string, { schema });
    return { store, cleanup: drop };
  },
  skipReason('DATABASE_URL'),
);
