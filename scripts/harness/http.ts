export interface HttpResult<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A small HTTP client over fetch: JSON in, JSON (or text) out, never throws on status. */
export function client(baseUrl: string, key?: string) {
  const call = async <T = any>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<HttpResult<T>> => {
    const h: Record<string, string> = { ...headers };
    if (key && !('authorization' in h)) h.authorization = `Bearer ${key}`;
    let payload: string | undefined;
    if (body !== undefined) {
      payload = typeof body === 'string' ? body : JSON.stringify(body);
      h['content-type'] ??= 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers: h, body: payload, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  };
  return {
    get: <T = any>(path: string, headers?: Record<string, string>) => call<T>('GET', path, undefined, headers),
    post: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) =>
      call<T>('POST', path, body, headers),
    patch: <T = any>(path: string, body?: unknown, headers?: Record<string, string>) =>
      call<T>('PATCH', path, body, headers),
    delete: <T = any>(path: string, headers?: Record<string, string>) => call<T>('DELETE', path, undefined, headers),
    call,
  };
}
export type Client = ReturnType<typeof client>;

/** Poll GET /jobs/{id} until the job reaches one of `statuses`. */
export async function waitForJob(
  api: Client,
  jobId: string,
  statuses: string[] = ['complete', 'failed'],
  timeoutMs = 20_000,
) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await api.get(`/jobs/${jobId}`);
    if (r.status === 200 && statuses.includes(r.body.status)) return r.body;
    if (Date.now() > deadline)
      throw new Error(`job ${jobId} still ${r.body?.status ?? r.status} after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** Wait until `check` returns a truthy value. */
export async function eventually<T>(
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
