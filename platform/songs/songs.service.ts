import type { JobEnvelope } from '../../contracts/common';
import type { SongRequest } from '../../contracts/songs';
import { toEnvelope } from '../jobs/jobs';
import type { Runtime } from '../runtime';

/** POST /songs: charge, record the job, publish it (platform/jobs/accept.ts `accept`). */
export function createSongsService(rt: Pick<Runtime, 'jobs'>) {
  return {
    async dispatch(input: {
      accountId: string;
      requestId: string;
      jobId?: string;
      request: SongRequest;
    }): Promise<{ envelope: JobEnvelope; charged: number }> {
      const { job, charged } = await rt.jobs.accept({
        accountId: input.accountId,
        requestId: input.requestId,
        jobId: input.jobId,
        type: 'song',
        operation: 'song',
        input: input.request,
      });
      return { envelope: toEnvelope(job), charged };
    },
  };
}
