import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';

/**
 * What a log line is about, carried through async calls: the request that made the work and,
 * inside a worker, the job. The API sets it per request; a worker sets it per message from the
 * headers the API published (`x-request-id`), so every line about a job names its request.
 */
export interface WorkContext {
  requestId?: string;
  jobId?: string;
}

const storage = new AsyncLocalStorage<WorkContext>();

/** The context of the running code (empty outside any request or job). */
export const currentContext = (): WorkContext => storage.getStore() ?? {};

/** Run `fn` in a new context of its own (a request, a message): nothing of the caller's carries over. */
export const startContext = <T>(ctx: WorkContext, fn: () => T): T => storage.run(ctx, fn);

/** Run `fn` with `ctx` added to the current context. */
export const withContext = <T>(ctx: WorkContext, fn: () => T): T => storage.run({ ...storage.getStore(), ...ctx }, fn);

/**
 * `fn` bound to the current context, for callbacks that an emitter or stream calls later from its
 * own context (body-parser calls `next` from the socket's 'end' event). Binds every
 * AsyncLocalStorage at once, OpenTelemetry's included.
 */
// biome-ignore lint/suspicious/noExplicitAny: any[] parameters accept every function (unknown[] would not); AsyncResource.bind takes the same
export const bindContext = <F extends (...args: any[]) => unknown>(fn: F): F => AsyncResource.bind(fn) as unknown as F;

/** AMQP header carrying the request id of the work a message belongs to. WARNING: read by every worker version. */
export const REQUEST_ID_HEADER = 'x-request-id';
