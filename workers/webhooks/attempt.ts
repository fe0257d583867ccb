import http from 'node:http';
import https from 'node:https';
import { guardedLookup, targetProblem } from '../../platform/webhooks/target';

export type AttemptOutcome = 'delivered' | 'http_error' | 'timeout' | 'network_error' | 'blocked';

export interface AttemptResult {
  outcome: AttemptOutcome;
  statusCode: number | null;
  durationMs: number;
  responseExcerpt: string | null;
  error: string | null;
}

export interface AttemptOptions {
  /** The whole attempt, connection to last byte (SPEC 6.4: 5 s). */
  timeoutMs: number;
  allowLoopback: boolean;
  /** Characters of the response kept. */
  excerptMax: number;
}

// Keep-alive sockets per process: deliveries to one receiver reuse connections.
const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64 }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64 }),
};

/**
 * POST one signed body to a webhook target. Never throws: every way an attempt can end is an
 * outcome. The target is checked by the SSRF guard before the attempt and again when the socket
 * connects; redirects are not followed (a 3xx is not a 2xx, so it is a failed attempt).
 */
export async function attemptDelivery(
  url: string,
  body: string,
  headers: Record<string, string>,
  opts: AttemptOptions,
): Promise<AttemptResult> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const problem = await targetProblem(url, { allowLoopback: opts.allowLoopback });
  if (problem)
    return {
      outcome: 'blocked',
      statusCode: null,
      durationMs: elapsed(),
      responseExcerpt: null,
      error: `target refused: ${problem}`,
    };

  const target = new URL(url);
  const isHttp = target.protocol === 'http:';
  const mod = isHttp ? http : https;
  const maxBytes = opts.excerptMax * 4;

  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    let statusCode: number | null = null;
    const chunks: Buffer[] = [];
    let kept = 0;
    const finish = (outcome: AttemptOutcome, error: string | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      const text = chunks.length ? Buffer.concat(chunks).toString('utf8').slice(0, opts.excerptMax) : null;
      resolve({ outcome, statusCode, durationMs: elapsed(), responseExcerpt: text, error });
    };
    const byStatus = () => {
      const s = statusCode ?? 0;
      return s >= 200 && s < 300 ? finish('delivered', null) : finish('http_error', `receiver answered HTTP ${s}`);
    };

    let req: http.ClientRequest;
    try {
      req = mod.request(target, {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        agent: isHttp ? agents.http : agents.https,
        lookup: guardedLookup({ allowLoopback: opts.allowLoopback, http: isHttp }),
      });
    } catch (err) {
      settled = true;
      return resolve({
        outcome: 'network_error',
        statusCode: null,
        durationMs: elapsed(),
        responseExcerpt: null,
        error: `request not sent: ${(err as Error).message}`.slice(0, 500),
      });
    }
    const timer = setTimeout(() => {
      // Headers already in: the receiver answered, its status decides; else it is a timeout.
      if (statusCode !== null) byStatus();
      else finish('timeout', `no answer within ${opts.timeoutMs} ms`);
      req.destroy();
    }, opts.timeoutMs);

    req.on('response', (res) => {
      statusCode = res.statusCode ?? 0;
      res.on('data', (c: Buffer) => {
        if (kept >= maxBytes) return;
        chunks.push(c.subarray(0, maxBytes - kept));
        kept += Math.min(c.length, maxBytes - kept);
        if (kept >= maxBytes) {
          // Enough for the excerpt: the status decides, the rest of the body is not read.
          byStatus();
          res.destroy();
        }
      });
      res.on('end', byStatus);
      res.on('error', byStatus);
      res.on('close', byStatus);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (settled) return;
      if (err.code === 'ETARGETBLOCKED') return finish('blocked', `target refused: ${err.message}`);
      finish('network_error', `${err.code ?? 'error'}: ${err.message}`.slice(0, 500));
    });
    req.end(body);
  });
}
