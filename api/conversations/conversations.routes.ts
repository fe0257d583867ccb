import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createConversationsService } from '../../platform/conversations/conversations.service';

/** Routes of conversations (SPEC 4.6, all but POST /chat). */
export function conversationsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createConversationsService(rt);
  const account = (ctx: { auth: { account: { _id: string } } }) => ctx.auth.account._id;

  mount(r, endpoints.listConversations, (ctx) => service.list(account(ctx), ctx.query), deps);
  mount(r, endpoints.createConversation, (ctx) => service.create(account(ctx), ctx.body, ctx.idFor), deps);
  mount(r, endpoints.getConversation, (ctx) => service.get(account(ctx), ctx.params.id!), deps);
  mount(
    r,
    endpoints.updateConversation,
    (ctx) => service.update(account(ctx), ctx.params.id!, ctx.body, ctx.ifMatch),
    deps,
  );
  mount(
    r,
    endpoints.deleteConversation,
    async (ctx) => {
      await service.remove(account(ctx), ctx.params.id!);
      return undefined;
    },
    deps,
  );
  mount(
    r,
    endpoints.listConversationMessages,
    (ctx) => service.messages(account(ctx), ctx.params.id!, ctx.query),
    deps,
  );
  return r;
}
