import type { DriveKind } from './drive.types';

/**
 * A Drive file's `kind` and `mimeType`, from its bytes first and its extension second:
 *
 * 1. The magic numbers (file-type, which reads the first few KiB). What the bytes say wins over
 *    the name: a PNG named notes.txt is `image` / `image/png`; a Windows executable named
 *    report.pdf is `other` / `application/x-msdownload` (never a PDF).
 * 2. Containers that need the extension to be told apart: a zip named .odt/.ods/.odp/.epub, an
 *    OLE compound file named .doc/.xls/.ppt, XML named .svg/.html/….
 * 3. No signature: bytes that are valid UTF-8 (without NUL and other control bytes) are text, typed by the extension
 *    (md → text/markdown, csv → text/csv, json → application/json, code extensions → code,
 *    anything else → text/plain). Other bytes are `other` / `application/octet-stream`.
 */
export interface DetectedType {
  kind: DriveKind;
  mimeType: string;
}

/** Text formats by extension (used only when the bytes are valid UTF-8). */
const TEXT_EXTS: Record<string, DetectedType> = {
  txt: { kind: 'text', mimeType: 'text/plain' },
  text: { kind: 'text', mimeType: 'text/plain' },
  log: { kind: 'text', mimeType: 'text/plain' },
  md: { kind: 'text', mimeType: 'text/markdown' },
  markdown: { kind: 'text', mimeType: 'text/markdown' },
  rst: { kind: 'text', mimeType: 'text/x-rst' },
  csv: { kind: 'spreadsheet', mimeType: 'text/csv' },
  tsv: { kind: 'spreadsheet', mimeType: 'text/tab-separated-values' },
  svg: { kind: 'image', mimeType: 'image/svg+xml' },
  rtf: { kind: 'document', mimeType: 'application/rtf' },
};

const CODE_EXTS: Record<string, string> = {
  json: 'application/json',
  html: 'text/html',
  htm: 'text/html',
  xml: 'application/xml',
  css: 'text/css',
  js: 'text/javascript',
  mjs: 'text/javascript',
  cjs: 'text/javascript',
  jsx: 'text/javascript',
  ts: 'text/x-typescript',
  tsx: 'text/x-typescript',
  py: 'text/x-python',
  rb: 'text/x-ruby',
  go: 'text/x-go',
  rs: 'text/x-rust',
  java: 'text/x-java',
  kt: 'text/x-kotlin',
  swift: 'text/x-swift',
  c: 'text/x-c',
  h: 'text/x-c',
  cpp: 'text/x-c++',
  cc: 'text/x-c++',
  hpp: 'text/x-c++',
  cs: 'text/x-csharp',
  php: 'text/x-php',
  sh: 'text/x-shellscript',
  bash: 'text/x-shellscript',
  zsh: 'text/x-shellscript',
  ps1: 'text/plain',
  sql: 'application/sql',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  toml: 'application/toml',
  ini: 'text/plain',
  r: 'text/x-r',
  scala: 'text/x-scala',
  lua: 'text/x-lua',
  pl: 'text/x-perl',
  vue: 'text/plain',
  svelte: 'text/plain',
  dart: 'text/plain',
  graphql: 'application/graphql',
};

/** A zip or OLE container told apart by its extension. */
const CONTAINER_EXTS: Record<string, DetectedType> = {
  odt: { kind: 'document', mimeType: 'application/vnd.oasis.opendocument.text' },
  ods: { kind: 'spreadsheet', mimeType: 'application/vnd.oasis.opendocument.spreadsheet' },
  odp: { kind: 'presentation', mimeType: 'application/vnd.oasis.opendocument.presentation' },
  epub: { kind: 'document', mimeType: 'application/epub+zip' },
  doc: { kind: 'document', mimeType: 'application/msword' },
  xls: { kind: 'spreadsheet', mimeType: 'application/vnd.ms-excel' },
  ppt: { kind: 'presentation', mimeType: 'application/vnd.ms-powerpoint' },
};

const ARCHIVES = new Set([
  'application/zip',
  'application/gzip',
  'application/x-tar',
  'application/x-7z-compressed',
  'application/x-rar-compressed',
  'application/x-bzip2',
  'application/x-xz',
  'application/zstd',
  'application/x-lzip',
  'application/x-lz4',
  'application/x-compress',
  'application/x-cpio',
  'application/x-arj',
  'application/x-ace-compressed',
  'application/x-lzh-compressed',
  'application/vnd.ms-cab-compressed',
  'application/java-archive',
  'application/x-unix-archive',
  'application/x-deb',
  'application/x-rpm',
  'application/x-apple-diskimage',
  'application/x-asar',
]);

const DOCUMENTS = new Set([
  'application/rtf',
  'application/vnd.ms-word.document.macroenabled.12',
  'application/vnd.ms-word.template.macroenabled.12',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'application/x-mobipocket-ebook',
  'application/postscript',
  'application/eps',
]);
const SPREADSHEETS = new Set([
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/vnd.ms-excel.sheet.macroenabled.12',
  'application/vnd.ms-excel.template.macroenabled.12',
]);
const PRESENTATIONS = new Set([
  'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  'application/vnd.ms-powerpoint.presentation.macroenabled.12',
  'application/vnd.ms-powerpoint.slideshow.macroenabled.12',
  'application/vnd.ms-powerpoint.template.macroenabled.12',
]);

function kindOfMime(mime: string): DriveKind {
  if (mime === 'application/pdf') return 'pdf';
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('video/') || mime === 'application/mxf' || mime === 'application/vnd.rn-realmedia')
    return 'video';
  if (mime.startsWith('audio/') || mime === 'application/ogg') return 'audio';
  if (DOCUMENTS.has(mime)) return 'document';
  if (SPREADSHEETS.has(mime)) return 'spreadsheet';
  if (PRESENTATIONS.has(mime)) return 'presentation';
  if (ARCHIVES.has(mime)) return 'archive';
  if (mime.startsWith('text/')) return 'text';
  return 'other';
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** True when the bytes are valid UTF-8 without NUL or other C0 controls but tab, LF, FF, CR and ESC (what a text file is). */
export function isUtf8Text(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0c && b !== 0x0d && b !== 0x1b) return false;
    if (b === 0x7f) return false;
  }
  try {
    utf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

/** The text type of a UTF-8 file with extension `ext`. */
function textType(ext: string): DetectedType {
  const t = TEXT_EXTS[ext];
  if (t) return t;
  const code = CODE_EXTS[ext];
  if (code) return { kind: 'code', mimeType: code };
  return { kind: 'text', mimeType: 'text/plain' };
}

/** kind and mimeType of `bytes` named with extension `ext` (lower case, no dot). */
export async function detectDriveType(bytes: Uint8Array, ext: string): Promise<DetectedType> {
  // Loaded by the first upload rather than at the API's start.
  const ft = bytes.length > 0 ? await (await import('file-type')).fileTypeFromBuffer(bytes) : undefined;
  if (ft) {
    const mime = ft.mime as string;
    if ((mime === 'application/zip' || mime === 'application/x-cfb') && CONTAINER_EXTS[ext]) {
      const c = CONTAINER_EXTS[ext]!;
      // A zip is never a .doc and an OLE file never an .odt: only the family that matches.
      const zipFamily = ['odt', 'ods', 'odp', 'epub'].includes(ext);
      if ((mime === 'application/zip') === zipFamily) return c;
    }
    if (mime === 'application/xml' && isUtf8Text(bytes)) {
      const t = textType(ext);
      return t.mimeType === 'text/plain' ? { kind: 'code', mimeType: 'application/xml' } : t;
    }
    return { kind: kindOfMime(mime), mimeType: mime };
  }
  if (bytes.length > 0 && !isUtf8Text(bytes)) return { kind: 'other', mimeType: 'application/octet-stream' };
  return textType(ext);
}
