import { createSignInLinks } from '../../platform/console/sessions.repository';
import type { Stack } from '../../scripts/harness/stack';

/** The console's origin of a stack (its API base URL without /api/v1). */
export const origin = (stack: Pick<Stack, 'baseUrl'>) => stack.baseUrl.replace(/\/api\/v1$/, '');

export interface ConsoleResponse {
  status: number;
  location: string | null;
  setCookie: string[];
  text: string;
}

const read = async (res: Response): Promise<ConsoleResponse> => ({
  status: res.status,
  location: res.headers.get('location'),
  setCookie: res.headers.getSetCookie(),
  text: await res.text(),
});

/** GET a console path without following redirects, with an optional Cookie header. */
export const get = async (stack: Stack, path: string, cookie?: string) =>
  read(await fetch(origin(stack) + path, { redirect: 'manual', headers: cookie ? { cookie } : {} }));

/** POST a form to a console path without following redirects, with an optional Cookie header and others (Origin, Sec-Fetch-Site). */
export const post = async (
  stack: Stack,
  path: string,
  form: Record<string, string | string[]>,
  cookie?: string,
  headers: Record<string, string> = {},
) => {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(form)) for (const x of ([] as string[]).concat(v)) body.append(k, x);
  return read(
    await fetch(origin(stack) + path, {
      method: 'POST',
      redirect: 'manual',
      body,
      headers: { ...headers, ...(cookie ? { cookie } : {}) },
    }),
  );
};

/** The token of a sign-in URL. */
export const tokenOf = (url: string) => new URL(url).searchParams.get('token')!;

/** The `name=value` part of the session cookie a response set. */
export const sessionCookie = (r: ConsoleResponse) =>
  r.setCookie.find((c) => c.startsWith('console_session='))!.split(';')[0]!;

/** The CSRF token a signed-in page carries in its forms. */
export const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)![1]!;

/** Sign in as an account the way a person does (link → button) and return the Cookie header and the CSRF token. */
export async function signIn(stack: Stack, accountId: string): Promise<{ cookie: string; csrf: string }> {
  const { url } = await createSignInLinks(stack.rt.store, stack.config).forAccount(accountId).issue();
  const r = await post(stack, '/console/sign-in', { token: tokenOf(url) });
  const cookie = sessionCookie(r);
  const page = await get(stack, '/console/keys', cookie);
  return { cookie, csrf: csrfOf(page.text) };
}
