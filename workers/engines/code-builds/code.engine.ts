/** What a code engine receives: the validated request with the framework resolved. */
export interface CodeEngineInput {
  name: string;
  prompt: string;
  framework: 'html' | 'react';
  planFirst: boolean;
}

export interface CodeEngineOutput {
  /** The whole runnable app: one self-contained HTML file. */
  html: string;
  /** Markdown plan when planFirst was asked. */
  plan: string | null;
  summary: string;
}

export interface CodeEngine {
  /** Public engine name reported in the result. */
  readonly name: string;
  build(
    input: CodeEngineInput,
    ctx: { signal: AbortSignal; progress(raw: string, msg: string): Promise<void> },
  ): Promise<CodeEngineOutput>;
}
