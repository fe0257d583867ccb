import type { Response } from 'express';

/**
 * Aborts `ac` when the client's connection closes before the answer was written in full, and at
 * once when it is gone already: a client that left while its request was still in the middleware
 * (authentication, limits, a hold) closed before any handler could listen, and its 'close' will
 * not come again. Returns the function that stops listening.
 */
export function abortWhenClientLeaves(res: Response, ac: AbortController, reason?: unknown): () => void {
  const onClose = () => {
    if (!res.writableFinished) ac.abort(reason);
  };
  res.on('close', onClose);
  if (!res.writableFinished && (res.destroyed || !res.socket || res.socket.destroyed)) ac.abort(reason);
  return () => res.off('close', onClose);
}
