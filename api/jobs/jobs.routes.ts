import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { notFound } from '../../platform/infra/errors';
import { toEnvelope } from '../../platform/jobs/jobs';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';

export function jobsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  // One read by _id, or none while the job is in flight and cached (platform/jobs/job-cache.ts).
  mount(
    r,
    endpoints.getJob,
    async ({ auth, params }) => {
      const id = params.id ?? '';
      const envelope = await deps.jobCache.get(auth.account._id, id, async () => {
        const job = await rt.jobs.findById(id);
        return job && { accountId: job.accountId, envelope: toEnvelope(job) };
      });
      if (!envelope) throw notFound('job');
      return envelope;
    },
    deps,
  );
  return r;
}
