import { NotTextError, type DriveTextExtractor } from './drive-text.engine';

/** Share of control characters (other than tab, line feed, carriage return, form feed) beyond which bytes are binary, not text. */
const MAX_CONTROL_SHARE = 0.01;

/**
 * utf8-text-v1: text and code files as they are, decoded as strict UTF-8 (a byte-order mark is
 * dropped). Invalid UTF-8, or bytes with NUL or many control characters, are not text (`none`).
 */
export function createUtf8Extractor(): DriveTextExtractor {
  return {
    name: 'utf8-text-v1',
    async extract(bytes, { signal, maxChars }) {
      signal.throwIfAborted();
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
      } catch {
        throw new NotTextError('the bytes are not valid UTF-8');
      }
      if (text.includes('\u0000')) throw new NotTextError('the bytes hold NUL characters: a binary file');
      const controls = text.match(/[\u0001-\u0008\u000b\u000e-\u001f\u007f]/g)?.length ?? 0;
      if (controls > Math.max(8, text.length * MAX_CONTROL_SHARE))
        throw new NotTextError('the bytes hold many control characters: a binary file');
      return { text: text.length > maxChars ? text.slice(0, maxChars + 1) : text, truncated: false };
    },
  };
}
