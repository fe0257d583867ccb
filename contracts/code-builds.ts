import { z } from 'zod';
import { line, text } from './common';

/** SPEC 2.13 code-build request. */
export const CodeBuildRequest = z
  .strictObject({
    prompt: text(20_000).min(1, { error: 'must not be empty' }).describe('What the app should do.'),
    name: line(255).optional().describe('App name; derived from the prompt when omitted.'),
    framework: z
      .enum(['html', 'react', 'auto'], { error: 'must be one of html, react, auto' })
      .optional()
      .describe('Default auto: react when the prompt asks for React, else plain html.'),
    planFirst: z
      .boolean({ error: 'must be a boolean' })
      .optional()
      .describe('Write a plan before building; the plan is in the result.'),
  })
  .meta({ id: 'CodeBuildRequest' });
export type CodeBuildRequest = z.infer<typeof CodeBuildRequest>;

/** Result of a complete `code` job (SPEC 2.21 leaves it to us). */
export const CodeBuildResult = z
  .object({
    name: z.string(),
    framework: z.enum(['html', 'react']).describe('The framework actually used.'),
    engine: z.string().describe('Engine that built the app, e.g. local-template-v1.'),
    appUrl: z.string().describe('Absolute, public, signed URL of the runnable index.html.'),
    files: z.array(
      z.object({
        path: z.string(),
        url: z.string(),
        mimeType: z.string(),
        sizeBytes: z.number().int(),
        sha256: z.string(),
      }),
    ),
    plan: z.string().nullable().describe('Markdown plan, when planFirst was set.'),
    summary: z.string(),
  })
  .meta({ id: 'CodeBuildResult' });
export type CodeBuildResult = z.infer<typeof CodeBuildResult>;
