import type { CodeBuildRequest } from '../../contracts/code-builds';
import type { JobEnvelope } from '../../contracts/common';
import { toEnvelope } from '../../platform/jobs';
import type { Runtime } from '../../platform/runtime';
import { newId } from '../../platform/ids';
import { JOB_ID_PREFIX } from '../../contracts/registry';

/**
 * POST /code-builds: charge, record the job, publish it. The debit comes first so a short
 * balance refuses before anything is stored; a failed insert gives the credits back.
 */
export function createCodeBuildsService(rt: Pick<Runtime, 'credits' | 'jobs'>) {
  return {
    async dispatch(input: { accountId: string; requestId: string; request: CodeBuildRequest }): Promise<{ envelope: JobEnvelope; charged: number }> {
      const amount = rt.credits.price('code_build');
      const jobId = newId(JOB_ID_PREFIX.code);
      await rt.credits.debit({ accountId: input.accountId, operation: 'code_build', amount, jobId, requestId: input.requestId });
      let job;
      try {
        job = await rt.jobs.create({ id: jobId, accountId: input.accountId, type: 'code', input: input.request, credits: { operation: 'code_build', amount } });
      } catch (err) {
        await rt.credits.refund({ accountId: input.accountId, operation: 'code_build', amount, jobId });
        throw err;
      }
      await rt.jobs.dispatch(job);
      return { envelope: toEnvelope(job), charged: amount };
    },
  };
}
