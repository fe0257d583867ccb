import { Router } from 'express';
import { endpoints } from '../../contracts/endpoints';
import type { Runtime } from '../../platform/runtime';
import { abortWhenClientLeaves } from '../http/client-gone';
import { mount, type RouteDeps } from '../http/route';
import { createChatService, type ChatService } from '../../platform/assistant/chat.service';
import { openUiStream, toUiChunk } from './ui-stream';

/**
 * POST /chat (SPEC 4.6, 2.7): one assistant turn, streamed (AI SDK v5 UI-message SSE) or
 * assembled (stream false). Everything that can refuse (400, 404, 402) answers in the Error
 * shape before the stream starts; afterwards a failure is an `error` chunk, then finish and
 * [DONE]. A client that leaves aborts the turn: the engine and the running tool get the signal,
 * later tools do not run, the turn's credits go back.
 */
export function chatRoutes(rt: Runtime, deps: RouteDeps, opts: { service?: ChatService } = {}): Router {
  const r = Router();
  let service = opts.service;

  mount(
    r,
    endpoints.chat,
    async (ctx) => {
      service ??= createChatService(rt);
      const { account, key } = ctx.auth;
      const whiteLabel = account.features?.whiteLabel === true;
      // Listening before begin(): a client gone while the hold is taken must not run the turn.
      const abort = new AbortController();
      abortWhenClientLeaves(ctx.res, abort);
      const turn = await service.begin({ account, key, requestId: ctx.requestId }, ctx.body);
      if (abort.signal.aborted) {
        await turn.settle(); // nothing ran: the hold goes back now
        ctx.res.status(499).end();
        return undefined;
      }
      ctx.res.setHeader('X-Conversation-Id', turn.conversationId);

      if (!ctx.body.stream) {
        const { charged, ...answer } = await service.complete(turn, abort.signal, whiteLabel);
        ctx.charged(charged);
        return answer;
      }

      const stream = openUiStream(ctx.res, { keepaliveMs: rt.config.CHAT_KEEPALIVE_MS });
      try {
        await stream.send({
          type: 'start',
          messageId: turn.messageId,
          messageMetadata: { conversationId: turn.conversationId, mode: turn.mode },
        });
        for await (const ev of turn.events(abort.signal)) {
          const chunk = toUiChunk(ev);
          if (chunk) await stream.send(chunk);
          if (abort.signal.aborted) break;
        }
      } catch (err) {
        // A bug after the stream started: the client still gets the protocol's ending.
        rt.log.error('chat stream failed', { requestId: ctx.requestId, err: err as Error });
        if (!abort.signal.aborted)
          await stream.send({
            type: 'error',
            errorText: 'the assistant failed unexpectedly; nothing was charged for this turn',
          });
      }
      const outcome = await turn.settle();
      if (outcome.kind === 'finished') ctx.charged(outcome.charged);
      if (abort.signal.aborted) {
        stream.abandon();
        // Ended all the same (a no-op on the closed socket): the audit entry is written at the end.
        ctx.res.end();
        return undefined;
      } else if (outcome.kind === 'failed' && outcome.unreported)
        await stream.send({ type: 'error', errorText: `${outcome.errorText}; nothing was charged for this turn` });
      await stream.send({
        type: 'finish',
        messageMetadata: {
          conversationId: turn.conversationId,
          ...(outcome.kind === 'finished' ? { usage: outcome.usage } : {}),
        },
      });
      await stream.end();
      return undefined;
    },
    deps,
  );
  return r;
}
