import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { toEnvelope } from '../../platform/jobs/jobs';
import type { Runtime } from '../../platform/runtime';
import type { AuthContext } from '../http/context';
import { mount, type RouteDeps } from '../http/route';
import { answerJob, streamJob } from './job-watch';

export function jobsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  // One read by _id, or none while the job is cached (platform/jobs/job-cache.ts).
  const reader = (auth: AuthContext, id: string) => () =>
    deps.jobCache.get(auth.account._id, id, async () => {
      const job = await rt.jobs.findById(id);
      return job && { accountId: job.accountId, envelope: toEnvelope(job) };
    });
  mount(
    r,
    endpoints.getJob,
    async ({ auth, params, req, res }) => {
      const id = params.id ?? '';
      return answerJob(req, res, id, reader(auth, id), deps.jobWatch);
    },
    deps,
  );
  mount(
    r,
    endpoints.getJobEvents,
    async ({ auth, params, req, res }) => {
      const id = params.id ?? '';
      await streamJob(req, res, id, reader(auth, id), deps.jobWatch, deps.jobEventsHeartbeatMs);
    },
    deps,
  );
  return r;
}
