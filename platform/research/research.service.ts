import type { JobEnvelope } from '../../contracts/common';
import { JOB_ID_PREFIX } from '../../contracts/registry';
import type { ResearchJobInput, ResearchLegacy, ResearchRequest, ResearchSource } from '../../contracts/research';
import { notFound } from '../infra/errors';
import { toEnvelope } from '../jobs/jobs';
import type { ApiKeyDoc, JobDoc } from '../infra/mongo';
import type { Runtime } from '../runtime';

const PREFIX = `${JOB_ID_PREFIX.research}_`;

/** SPEC 2.16 legacy shape of a research job. */
export function toLegacy(job: JobDoc): ResearchLegacy {
  const r = (job.status === 'complete' ? job.result : null) as Record<string, unknown> | null;
  const partial = r?.partial === true;
  // The raw token: the pipeline's own status, with `partial` for a report that missed sources.
  const status =
    job.status === 'failed' ? 'failed' : job.status === 'complete' ? (partial ? 'partial' : 'complete') : job.rawStatus;
  const int = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) ? v : 0);
  return {
    jobId: job._id.startsWith(PREFIX) ? job._id.slice(PREFIX.length) : job._id,
    status,
    isComplete: status === 'complete' || status === 'partial',
    content: typeof r?.content === 'string' ? r.content : null,
    sources: Array.isArray(r?.sources) ? (r.sources as ResearchSource[]) : [],
    searchCount: int(r?.searchCount),
    readCount: int(r?.readCount),
    totalTokens: int(r?.totalTokens),
    errorMessage: job.status === 'failed' ? job.error : null,
    startedAt: job.startedAt ? job.startedAt.toISOString() : null,
    completedAt: job.completedAt ? job.completedAt.toISOString() : null,
  };
}

export function createResearchService(rt: Pick<Runtime, 'credits' | 'jobs'>) {
  return {
    /**
     * POST /research: charge, record the job, publish it (platform/jobs/accept.ts `accept`). Only the
     * validated, known fields are stored: SPEC 2.16's additional members are dropped here.
     * `drive` records what Drive the key may read, for the worker (it runs without the key):
     * nothing without `drive:read`, else the key's folder pins (empty = the whole personal drive).
     */
    async dispatch(input: {
      accountId: string;
      requestId: string;
      jobId?: string;
      request: ResearchRequest;
      key: Pick<ApiKeyDoc, 'scopes' | 'folderPins'>;
    }): Promise<{ envelope: JobEnvelope; charged: number }> {
      const stored: ResearchJobInput = {
        query: input.request.query,
        drive: input.key.scopes.includes('drive:read') ? { pins: [...(input.key.folderPins ?? [])] } : null,
      };
      const { job, charged } = await rt.jobs.accept({
        accountId: input.accountId,
        requestId: input.requestId,
        jobId: input.jobId,
        type: 'research',
        operation: 'research',
        input: stored,
      });
      return { envelope: toEnvelope(job), charged };
    },

    /** GET /research/{jobId}: raw or res_-prefixed id; another account's job or another type is a 404. */
    async legacy(accountId: string, rawOrPrefixed: string): Promise<ResearchLegacy> {
      const id = rawOrPrefixed.startsWith(PREFIX) ? rawOrPrefixed : PREFIX + rawOrPrefixed;
      const job = await rt.jobs.forAccount(accountId).find(id);
      if (job?.type !== 'research') throw notFound('research job');
      return toLegacy(job);
    },
  };
}
