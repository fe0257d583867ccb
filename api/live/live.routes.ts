import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import { fromUnits, toUnits } from '../../platform/credits/credits';
import { createLiveSessions } from '../../platform/live/sessions';
import { createLiveTools, type LiveTools } from '../../platform/live/tools';
import type { Runtime } from '../../platform/runtime';
import { mount, type RouteDeps } from '../http/route';

/** POST /live/session and POST /live/action (SPEC 4.8); the realtime engine itself is api/live/realtime.ts. */
export function liveRoutes(rt: Runtime, deps: RouteDeps): Router {
  const r = Router();
  const sessions = createLiveSessions(rt);
  let tools: LiveTools | undefined;

  mount(
    r,
    endpoints.createLiveSession,
    async (ctx) => {
      tools ??= createLiveTools(rt);
      // The session offers only the actions the key's scopes allow (SPEC §5).
      const out = await sessions.open(
        { account: ctx.auth.account, key: ctx.auth.key, requestId: ctx.requestId },
        ctx.body,
        { allowedTools: tools.allowed(ctx.auth.key.scopes) },
      );
      ctx.charged(toUnits(out.charged));
      return out;
    },
    deps,
  );

  mount(
    r,
    endpoints.runLiveAction,
    async (ctx) => {
      tools ??= createLiveTools(rt);
      const { action, params } = ctx.body;
      const out = await tools.run(action, params, {
        account: ctx.auth.account,
        key: ctx.auth.key,
        requestId: ctx.requestId,
        signal: AbortSignal.timeout(120_000),
        idFor: ctx.idFor,
      });
      ctx.charged(out.charged);
      return { action, ok: out.ok, line: out.line, artifacts: out.artifacts, charged: fromUnits(out.charged) };
    },
    deps,
  );
  return r;
}
