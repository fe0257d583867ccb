import type { CodeBuildRequest } from '../../contracts/code-builds';
import type { JobEnvelope } from '../../contracts/common';
import { toEnvelope } from '../jobs/jobs';
import type { Runtime } from '../runtime';

/** POST /code-builds: charge, record the job, publish it (platform/jobs/accept.ts `accept`). */
export function createCodeBuildsService(rt: Pick<Runtime, 'jobs'>) {
  return {
    async dispatch(input: {
      accountId: string;
      requestId: string;
      jobId?: string;
      request: CodeBuildRequest;
    }): Promise<{ envelope: JobEnvelope; charged: number }> {
      const { job, charged } = await rt.jobs.accept({
        accountId: input.accountId,
        requestId: input.requestId,
        jobId: input.jobId,
        type: 'code',
        operation: 'code_build',
        input: input.request,
      });
      return { envelope: toEnvelope(job), charged };
    },
  };
}
