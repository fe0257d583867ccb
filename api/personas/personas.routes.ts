import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { toUnits } from '../../platform/credits/credits';
import { createPersonasService } from '../../platform/personas/personas.service';
import { pageWhole } from '../../platform/infra/lists';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';

/** Routes of personas, their deployments and conversations (SPEC 4.2). */
export function personasRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createPersonasService(rt);
  const svc = () => service;
  const account = (ctx: { auth: { account: { _id: string } } }) => ctx.auth.account._id;

  // Before /personas/{id}, which would otherwise take "faces" for an id.
  mount(
    r,
    endpoints.listPersonaFaces,
    async ({ query }) => pageWhole(svc().faces().data, query, 'persona-faces'),
    deps,
  );
  mount(r, endpoints.listPersonas, (ctx) => svc().list(account(ctx), ctx.query), deps);
  mount(r, endpoints.createPersona, (ctx) => svc().create(account(ctx), ctx.body, ctx.idFor), deps);
  mount(r, endpoints.getPersona, (ctx) => svc().get(account(ctx), ctx.params.id!), deps);
  mount(r, endpoints.updatePersona, (ctx) => svc().update(account(ctx), ctx.params.id!, ctx.body, ctx.ifMatch), deps);
  mount(
    r,
    endpoints.deletePersona,
    async (ctx) => {
      await svc().remove(account(ctx), ctx.params.id!);
      return undefined;
    },
    deps,
  );
  mount(r, endpoints.publishPersona, (ctx) => svc().publish(account(ctx), ctx.params.id!, ctx.ifMatch), deps);
  mount(
    r,
    endpoints.listPersonaDeployments,
    (ctx) => svc().listDeployments(account(ctx), ctx.params.id!, ctx.query),
    deps,
  );
  mount(
    r,
    endpoints.createPersonaDeployment,
    (ctx) => svc().createDeployment(account(ctx), ctx.params.id!, ctx.body, ctx.idFor),
    deps,
  );
  mount(
    r,
    endpoints.startPersonaConversation,
    async (ctx) => {
      const out = await svc().startConversation(
        { ...ctx.auth, requestId: ctx.requestId },
        ctx.params.id!,
        ctx.body,
        ctx.idFor,
      );
      ctx.charged(toUnits(out.creditsUsed));
      return out;
    },
    deps,
  );
  mount(
    r,
    endpoints.endPersonaConversation,
    (ctx) => svc().endConversation(account(ctx), ctx.params.id!, ctx.params.cid!),
    deps,
  );
  mount(
    r,
    endpoints.listPersonaConversationEvents,
    (ctx) => svc().listEvents(account(ctx), ctx.params.id!, ctx.params.cid!, ctx.query),
    deps,
  );
  return r;
}
