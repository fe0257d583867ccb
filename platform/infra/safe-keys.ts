import { AppError, clip, ECHO_MAX } from './errors';

/** A field name as JSON (NUL shows as \u0000), at most ECHO_MAX characters with its quotes. */
const quoted = (k: string) => {
  const q = JSON.stringify(k);
  return q.length <= ECHO_MAX ? q : `${q.slice(0, ECHO_MAX - 2)}…"`;
};

/** A field name that must never reach the database: operators ($…), paths (a.b), NUL. */
const UNSAFE_KEY = /^\$|[.\u0000]/;

/**
 * Throws 400 naming the first field name, at any depth, that starts with `$` or holds `.` or NUL.
 * Iterative (an explicit stack of the objects and arrays still to visit; primitives are never
 * pushed), like the depth check; the path is built only for the message.
 */
export function assertSafeKeys(body: unknown): void {
  interface Node {
    value: object;
    parent?: Node;
    key?: string;
  }
  const pathOf = (n: Node | undefined) => {
    const parts: string[] = [];
    for (let c = n; c?.key !== undefined; c = c.parent) parts.unshift(c.key);
    return parts.join('.');
  };
  if (body === null || typeof body !== 'object') return;
  const stack: Node[] = [{ value: body }];
  while (stack.length) {
    const node = stack.pop()!;
    if (Array.isArray(node.value)) {
      const items: unknown[] = node.value;
      for (let i = 0; i < items.length; i++) {
        const v = items[i];
        if (v !== null && typeof v === 'object') stack.push({ value: v, parent: node, key: String(i) });
      }
      continue;
    }
    const obj = node.value as Record<string, unknown>;
    for (const k of Object.keys(obj)) {
      if (UNSAFE_KEY.test(k)) {
        const path = pathOf(node);
        throw new AppError(
          'validation_error',
          `${path ? `${clip(path)}: ` : ''}${quoted(k)}: field names must not start with $ or contain . or NUL`,
        );
      }
      const v = obj[k];
      if (v !== null && typeof v === 'object') stack.push({ value: v, parent: node, key: clip(k) });
    }
  }
}
