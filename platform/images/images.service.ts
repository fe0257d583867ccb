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
import { AppError } from '../infra/errors';
import type { AuthAccount } from '../accounts/accounts';
import type { Runtime } from '../runtime';
import { assertFetchable } from '../infra/ssrf';
import { fromUnits } from '../credits/credits';
import { paidCall } from '../credits/paid-call';
import { resolveImageEngine } from './images.rules';

/**
 * POST /images and POST /images/moonlight: check, charge, hand the render to the image pool over
 * RabbitMQ request/reply with a deadline, and answer with what the pool rendered. Credits are
 * debited before the call (a short balance refuses before any work) and refunded when no render
 * is delivered: a refusal by the pool (bad reference, adult render), a pool error, or the
 * deadline (504 timeout). So only a delivered render stays charged.
 */
export function createImagesService(rt: Pick<Runtime, 'amqp' | 'credits' | 'config' | 'log'>) {
  const { config } = rt;

  // A hold, not a plain debit: if this process dies while it waits, the scheduler gives it back.
  const callPool = <T>(
    op: CreditOperation,
    accountId: string,
    requestId: string,
    payload: ImageRpcRequest,
  ): Promise<{ result: T; charged: number }> =>
    paidCall<T>(rt, {
      pool: 'image',
      operation: payload.kind,
      payload,
      timeoutMs: config.IMAGE_RPC_TIMEOUT_MS,
      charge: op,
      accountId,
      requestId,
    });

  return {
    async render(input: { account: AuthAccount; requestId: string; request: ImageRequest }): Promise<ImageResult> {
      const { account, request } = input;
      const { engine, notes } = resolveImageEngine({
        plan: account.plan,
        features: account.features,
        requested: request.engine,
      });
      const refs = request.referenceImageUrls ?? [];
      // Refuse private targets before charging; the worker checks again at every fetch.
      const loop = config.ALLOW_LOOPBACK_URLS;
      for (const [i, url] of refs.entries())
        await assertFetchable(url, `referenceImageUrls.${i}`, { allowLoopback: loop });
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
      return { ...result, charged: fromUnits(charged) };
    },

    async moonlight(input: {
      account: AuthAccount;
      requestId: string;
      request: MoonlightRequest;
    }): Promise<{ result: MoonlightResult; charged: number }> {
      const { request } = input;
      const term = adultTermIn(request.prompt);
      if (term)
        throw new AppError(
          'adult_content',
          `prompt: describes adult content ("${term}"); this model renders safe-for-work images only`,
        );
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
