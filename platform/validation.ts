import type { z } from 'zod';
import { AppError } from './errors';

/** "slideCount: must be between 3 and 30; prompt: is required" */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  return issues
    .slice(0, 10)
    .map((i) => {
      const path = i.path.length ? i.path.map(String).join('.') : 'body';
      if (i.code === 'invalid_type' && (i as { input?: unknown }).input === undefined) return `${path}: is required`;
      if (i.code === 'unrecognized_keys') return `${i.keys.join(', ')}: unknown field`;
      return `${path}: ${i.message}`;
    })
    .join('; ');
}

/** Parse with a contract or throw a validation_error naming the field. */
export function parseOrThrow<T extends z.ZodType>(schema: T, value: unknown, where: 'body' | 'query' = 'body'): z.output<T> {
  if (where === 'body' && (value === undefined || value === null || typeof value !== 'object' || Array.isArray(value))) {
    throw new AppError('validation_error', 'body: must be a JSON object');
  }
  const r = schema.safeParse(value ?? {}, { reportInput: true });
  if (!r.success) throw new AppError('validation_error', formatIssues(r.error.issues));
  return r.data;
}
