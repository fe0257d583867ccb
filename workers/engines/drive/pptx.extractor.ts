import { createPptxExtractor } from '../extract/pptx.extractor';
import type { DriveTextExtractor } from './drive-text.engine';

/**
 * pptx-xml-v1: the text of every slide's XML in presentation order (the extract pool's reader:
 * jszip + fast-xml-parser, each part inflated with a size cap, at most 500 slides), a slide's title
 * as `# Title` and its bullets as `- item`.
 */
export function createDrivePptxExtractor(): DriveTextExtractor {
  const inner = createPptxExtractor();
  return {
    name: 'pptx-xml-v1',
    async extract(bytes, { signal }) {
      const r = await inner.extract(bytes, { signal });
      return { text: r.text, truncated: r.truncated };
    },
  };
}
