import type { JobEnvelope } from '../../contracts/common';
import { JOB_ID_PREFIX } from '../../contracts/registry';
import type { SongRequest } from '../../contracts/songs';
import { newId } from '../../platform/ids';
import { toEnvelope } from '../../platform/jobs';
import type { Runtime } from '../../platform/runtime';

/** POST /songs: charge, record the job, publish it; a failed insert gives the credits back. */
export function createSongsService(rt: Pick<Runtime, 'credits' | 'jobs'>) {
  return {
    async dispatch(input: { accountId: string; requestId: string; request: SongRequest }): Promise<{ envelope: JobEnvelope; charged: number }> {
      const amount = rt.credits.price('song');
      const jobId = newId(JOB_ID_PREFIX.song);
      await rt.credits.debit({ accountId: input.accountId, operation: 'song', amount, jobId, requestId: input.requestId });
      let job;
      try {
        job = await rt.jobs.create({ id: jobId, accountId: input.accountId, type: 'song', input: input.request, credits: { operation: 'song', amount } });
      } catch (err) {
        await rt.credits.refund({ accountId: input.accountId, operation: 'song', amount, jobId });
        throw err;
      }
      await rt.jobs.dispatch(job);
      return { envelope: toEnvelope(job), charged: amount };
    },
  };
}
