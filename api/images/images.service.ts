import { randomInt } from 'node:crypto';
import {
  MOONLIGHT_DEFAULTS,
  MOONLIGHT_MAX_SEED,
  adultTermIn,
  type ImageRequest,
  type ImageResult,
  type ImageRpcRequest,
  type MoonlightRequest,
  type MoonlightResult,
} from '../../contracts/images';
import type { CreditOperation } from '../../contracts/registry';
import { metrics } from '../../monitoring/metrics';
import { RpcTimeoutError } from '../../platform/amqp';
import { AppError, ERROR_STATUS, type ErrorCode } from '../../platform/errors';
import type { AuthAccount } from '../../platform/accounts';
import type { Runtime } from '../../platform/runtime';
import { assertFetchable } from '../../platform/ssrf';
import { resolveImageEngine } from './images.rules';

/**
 * POST /images and POST /images/moonlight: check, charge, hand the render to the image pool over
 * RabbitMQ request/reply with a deadline, and answer with what the pool rendered. Credits are
 * debited before the call (a short balance refuses before any work) and refunded when no render
 * is delivered: a refusal by the pool (bad reference, adult render), a pool error, or the
 * deadline (504 timeout). So only a delivered render stays charged.
 */
export function createImagesService(rt: Pick<Runtime, 'amqp' | 'credits' | 'config'>) {
  const { config, credits } = rt;

  const callPool = async <T>(op: CreditOperation, accountId: string, requestId: string, payload: ImageRpcRequest): Promise<{ result: T; charged: number }> => {
    const amount = credits.price(op);
    // A hold, not a plain debit: if this process dies while it waits, the scheduler gives it back.
    const hold = await credits.hold({ accountId, operation: op, amount, requestId, ttlMs: config.IMAGE_RPC_TIMEOUT_MS + 30_000 });
    let failure: AppError;
    const started = performance.now();
    const labels = { pool: 'image', operation: payload.kind };
    try {
      const reply = await rt.amqp.rpc<T>('image', payload, config.IMAGE_RPC_TIMEOUT_MS);
      metrics.rpcDuration.observe(labels, (performance.now() - started) / 1000);
      metrics.rpcCalls.inc({ ...labels, outcome: reply.ok ? 'ok' : 'refused' });
      if (reply.ok) {
        await credits.capture(hold);
        return { result: reply.result, charged: amount };
      }
      const code = (reply.error.code in ERROR_STATUS ? reply.error.code : 'internal_error') as ErrorCode;
      failure = new AppError(code, reply.error.message);
    } catch (err) {
      const timeout = err instanceof RpcTimeoutError;
      metrics.rpcCalls.inc({ ...labels, outcome: timeout ? 'timeout' : 'unavailable' });
      failure = timeout
        ? new AppError('timeout', `the image pool did not answer within ${config.IMAGE_RPC_TIMEOUT_MS} ms; nothing was charged`, { cause: err })
        : new AppError('service_unavailable', 'the image pool is unreachable; nothing was charged', { cause: err });
    }
    await credits.release(hold);
    throw failure;
  };

  return {
    async render(input: { account: AuthAccount; requestId: string; request: ImageRequest }): Promise<ImageResult> {
      const { account, request } = input;
      const { engine, notes } = resolveImageEngine({ plan: account.plan, features: account.features, requested: request.engine });
      const refs = request.referenceImageUrls ?? [];
      // Refuse private targets before charging; the worker checks again at every fetch.
      const loop = config.ALLOW_LOOPBACK_URLS;
      for (const [i, url] of refs.entries()) await assertFetchable(url, `referenceImageUrls.${i}`, { allowLoopback: loop });
      const aspectRatio = request.aspectRatio ?? '1:1';
      const { result, charged } = await callPool<Omit<ImageResult, 'charged'>>('image', account._id, input.requestId, {
        kind: 'image',
        accountId: account._id,
        prompt: request.prompt,
        engine,
        aspectRatio,
        style: request.style ?? null,
        referenceImageUrls: refs,
        includeBase64: request.includeBase64 ?? false,
        notes,
      });
      return { ...result, charged };
    },

    async moonlight(input: { account: AuthAccount; requestId: string; request: MoonlightRequest }): Promise<{ result: MoonlightResult; charged: number }> {
      const { request } = input;
      const term = adultTermIn(request.prompt);
      if (term) throw new AppError('adult_content', `prompt: describes adult content ("${term}"); this model renders safe-for-work images only`);
      return callPool<MoonlightResult>('image_moonlight', input.account._id, input.requestId, {
        kind: 'moonlight',
        prompt: request.prompt,
        negativePrompt: (request.negativePrompt ?? '').trim(),
        aspectRatio: request.aspectRatio ?? MOONLIGHT_DEFAULTS.aspectRatio,
        seed: request.seed ?? randomInt(0, MOONLIGHT_MAX_SEED + 1),
      });
    },
  };
}
