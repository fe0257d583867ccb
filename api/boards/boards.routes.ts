import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';
import { createBoardsService } from '../../platform/boards/boards.service';

/** Routes of boards and cards (SPEC 4.5). */
export function boardsRoutes(rt: Runtime, deps: RouteDeps) {
  const r = Router();
  const service = createBoardsService(rt);
  const account = (ctx: { auth: { account: { _id: string } } }) => ctx.auth.account._id;

  mount(r, endpoints.listBoards, (ctx) => service.list(account(ctx), ctx.query), deps);
  mount(r, endpoints.createBoard, (ctx) => service.create(account(ctx), ctx.body, ctx.idFor), deps);
  mount(r, endpoints.getBoard, (ctx) => service.get(account(ctx), ctx.params.id!), deps);
  mount(r, endpoints.updateBoard, (ctx) => service.update(account(ctx), ctx.params.id!, ctx.body, ctx.ifMatch), deps);
  mount(
    r,
    endpoints.deleteBoard,
    async (ctx) => {
      await service.remove(account(ctx), ctx.params.id!);
      return undefined;
    },
    deps,
  );
  mount(
    r,
    endpoints.duplicateBoard,
    (ctx) => service.duplicate(account(ctx), ctx.params.id!, ctx.body, ctx.idFor),
    deps,
  );

  mount(r, endpoints.listCards, (ctx) => service.listCards(account(ctx), ctx.params.id!, ctx.query), deps);
  mount(r, endpoints.createCard, (ctx) => service.createCard(account(ctx), ctx.params.id!, ctx.body, ctx.idFor), deps);
  mount(
    r,
    endpoints.updateCard,
    (ctx) => service.updateCard(account(ctx), ctx.params.id!, ctx.params.cardId!, ctx.body, ctx.ifMatch),
    deps,
  );
  mount(
    r,
    endpoints.deleteCard,
    async (ctx) => {
      await service.deleteCard(account(ctx), ctx.params.id!, ctx.params.cardId!);
      return undefined;
    },
    deps,
  );
  return r;
}
