/**
 * How a stored job looks from outside: its poll path and its SPEC 2.4 envelope. Apart from the
 * service so that the routes, the other capabilities and the outbox's events can name a job's
 * URL without importing the service that moves it.
 */
import type { JobEnvelope } from '../../contracts/common';
import type { JobDoc } from '../infra/mongo';

export const pollPath = (jobId: string) => `/api/v1/jobs/${jobId}`;

/** SPEC 2.4 envelope of a stored job. */
export function toEnvelope(job: JobDoc): JobEnvelope {
  return {
    jobId: job._id,
    type: job.type,
    status: job.status,
    rawStatus: job.rawStatus,
    pollUrl: pollPath(job._id),
    progressMessage: job.progressMessage,
    result: job.status === 'complete' || job.type === 'space' ? job.result : null,
    error: job.error,
    createdAt: job.createdAt.toISOString(),
    updatedAt: job.updatedAt.toISOString(),
  };
}
