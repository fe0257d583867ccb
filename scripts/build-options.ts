/**
 * How the API is bundled, shared by scripts/build.ts and the startup bench's floor process (which
 * must be bundled the same way to be a fair floor). Imported with its `.ts` extension: build.ts
 * runs on Node's own TypeScript support, which does not guess extensions.
 */

/**
 * Dependencies the API bundle leaves in node_modules: native or optional modules, and the large
 * ones it loads only when first needed (the MCP SDK, file sniffing, ZIP, the OpenTelemetry SDK).
 */
const API_EXTERNAL = [
  'sharp',
  'pdfjs-dist',
  'bufferutil',
  'utf-8-validate',
  'kerberos',
  'snappy',
  '@mongodb-js/zstd',
  'mongodb-client-encryption',
  'gcp-metadata',
  'socks',
  'aws4',
  '@aws-sdk/credential-providers',
  '@modelcontextprotocol/*',
  'file-type',
  'jszip',
  '@opentelemetry/*',
];

export const API_BUNDLE = {
  external: API_EXTERNAL,
  // Bundled CommonJS dependencies call require() for Node's own modules: the banner provides it.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
};
