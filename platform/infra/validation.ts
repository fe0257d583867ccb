import type { z } from 'zod';
import { AppError, type ErrorDetail } from './errors';

/** At most this many failed rules are named (in the message and in `details`). */
const ISSUES_MAX = 10;

/** "slideCount: must be between 3 and 30; prompt: is required" */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .slice(0, ISSUES_MAX)
    .map((i) => {
      const path = i.path.length ? i.path.map(String).join('.') : 'body';
      if (i.code === 'invalid_type' && (i as { input?: unknown }).input === undefined) return `${path}: is required`;
      if (i.code === 'unrecognized_keys') return `${i.keys.join(', ')}: unknown field`;
      return `${path}: ${i.message}`;
    })
    .join('; ');
}

/**
 * The same issues as `error.details`: one entry per failed rule (per unknown field), `path`
 * dotted from the root of `where` (`ops.2.column`), `where` itself for the whole value.
 */
export function issueDetails(issues: readonly z.core.$ZodIssue[], where: 'body' | 'query' = 'body'): ErrorDetail[] {
  const dotted = (path: readonly PropertyKey[]) => (path.length ? path.map(String).join('.') : where);
  return issues
    .slice(0, ISSUES_MAX)
    .flatMap((i): ErrorDetail[] => {
      if (i.code === 'unrecognized_keys')
        return i.keys.map((k) => ({ path: dotted([...i.path, k]), code: i.code, message: 'unknown field' }));
      const required = i.code === 'invalid_type' && (i as { input?: unknown }).input === undefined;
      return [{ path: dotted(i.path), code: i.code, message: required ? 'is required' : i.message }];
    })
    .slice(0, ISSUES_MAX);
}

/** Parse with a contract or throw a validation_error naming the field. */
export function parseOrThrow<T extends z.ZodType>(
  schema: T,
  value: unknown,
  where: 'body' | 'query' = 'body',
): z.output<T> {
  if (
    where === 'body' &&
    (value === undefined || value === null || typeof value !== 'object' || Array.isArray(value))
  ) {
    throw new AppError('validation_error', 'body: must be a JSON object', {
      details: [{ path: 'body', code: 'invalid_type', message: 'must be a JSON object' }],
    });
  }
  const r = schema.safeParse(value ?? {}, { reportInput: true });
  if (!r.success)
    throw new AppError('validation_error', formatIssues(r.error.issues), {
      details: issueDetails(r.error.issues, where),
    });
  return r.data;
}
