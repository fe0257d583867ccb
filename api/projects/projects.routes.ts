import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createProjectsService } from '../../platform/projects/projects.service';
import { createTemplatesService, listTemplates } from '../../platform/templates/templates.service';

/** Routes of projects (flowcharts, whiteboards, notes, templates, shares) (SPEC 4.3). */
export function projectsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createProjectsService(rt);
  const templates = createTemplatesService(rt);
  const created = async (p: Promise<Parameters<typeof service.view>[0]>) => service.view(await p);

  mount(r, endpoints.listProjects, ({ auth, query }) => service.list(auth.account._id, query), deps);
  mount(r, endpoints.getProject, ({ auth, params }) => service.get(auth.account._id, params.id!), deps);
  mount(
    r,
    endpoints.updateProject,
    ({ auth, params, body, ifMatch }) => service.update(auth.account._id, params.id!, body, ifMatch),
    deps,
  );
  mount(
    r,
    endpoints.deleteProject,
    async ({ auth, params, ifMatch }) => {
      await service.remove(auth.account._id, params.id!, ifMatch);
      return undefined;
    },
    deps,
  );
  mount(
    r,
    endpoints.shareProject,
    ({ auth, params, body, ifMatch }) => service.share(auth.account._id, params.id!, body, ifMatch),
    deps,
  );

  mount(
    r,
    endpoints.createFlowchart,
    ({ auth, body, idFor }) =>
      created(
        service.create({
          accountId: auth.account._id,
          kind: 'flowchart',
          name: body.name,
          description: body.description,
          tags: body.tags,
          content: { nodes: body.nodes, edges: body.edges },
          idFor,
        }),
      ),
    deps,
  );
  mount(
    r,
    endpoints.createWhiteboard,
    ({ auth, body, idFor }) =>
      created(
        service.create({
          accountId: auth.account._id,
          kind: 'whiteboard',
          name: body.name,
          description: body.description,
          tags: body.tags,
          content: { background: body.background, elements: body.elements },
          idFor,
        }),
      ),
    deps,
  );
  mount(
    r,
    endpoints.createNotes,
    ({ auth, body, idFor }) =>
      created(
        service.create({
          accountId: auth.account._id,
          kind: 'notes',
          name: body.name,
          description: body.description,
          tags: body.tags,
          content: { markdown: body.markdown },
          idFor,
        }),
      ),
    deps,
  );

  mount(r, endpoints.listTemplates, async ({ query }) => listTemplates(query), deps);
  mount(
    r,
    endpoints.useTemplate,
    ({ auth, params, body, idFor }) => templates.use(auth.account._id, params.id!, body, idFor),
    deps,
  );
  return r;
}
