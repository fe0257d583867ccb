import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { notFound } from '../../platform/errors';
import { toEnvelope } from '../../platform/jobs';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';

export function jobsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  mount(r, endpoints.getJob, async ({ auth, params }) => {
    const job = await rt.jobs.findForAccount(auth.account._id, params.id ?? '');
    if (!job) throw notFound('job');
    return toEnvelope(job);
  }, deps);
  return r;
}
