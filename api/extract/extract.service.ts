import { fileTypeFromBuffer } from 'file-type';
import JSZip from 'jszip';
import {
  ExtractRpcReply,
  PPTX_MIME,
  type ExtractFlowchartRequest,
  type ExtractFlowchartResult,
  type ExtractMimeType,
  type ExtractRpcRequest,
  type ExtractionReport,
} from '../../contracts/extract';
import { FlowchartContent } from '../../contracts/projects';
import { metrics } from '../../monitoring/metrics';
import { RpcTimeoutError } from '../../platform/amqp';
import { AppError, ERROR_STATUS, type ErrorCode } from '../../platform/errors';
import type { ProjectDoc } from '../../platform/projects/projects.repository';
import type { Runtime } from '../../platform/runtime';
import { createProjectsService } from '../projects/projects.service';

const KIND_NAME: Record<ExtractMimeType, string> = {
  'application/pdf': 'a PDF',
  [PPTX_MIME]: 'a PowerPoint presentation (PPTX)',
  'image/png': 'a PNG image',
  'image/jpeg': 'a JPEG image',
  'image/webp': 'a WebP image',
};

/** Base64 characters whose bytes cover every signature file-type reads (4100 bytes). */
const SNIFF_CHARS = 5472;

/**
 * 400 naming documentBase64 unless the bytes are of the declared type, sniffed from their
 * content with file-type. Only the first 4 KB are decoded, except for a PPTX: a PPTX is a ZIP
 * (file-type may say zip, or pptx from the first entries), so the whole ZIP's directory is read
 * and must hold ppt/presentation.xml.
 */
export async function checkDocumentType(documentBase64: string, declared: ExtractMimeType): Promise<void> {
  const wrong = (what: string) => new AppError('validation_error', `documentBase64: the bytes are ${what}, not ${KIND_NAME[declared]} as mimeType says`);
  const found = await fileTypeFromBuffer(Buffer.from(documentBase64.slice(0, SNIFF_CHARS), 'base64'));
  if (declared !== PPTX_MIME) {
    if (found?.mime !== declared) throw wrong(found ? `${found.mime} (.${found.ext})` : 'of no recognised type');
    return;
  }
  if (!found || (found.ext !== 'zip' && found.mime !== PPTX_MIME)) throw wrong(found ? `${found.mime} (.${found.ext})` : 'of no recognised type');
  let zip: JSZip;
  try {
    zip = await JSZip.loadAsync(Buffer.from(documentBase64, 'base64'), { checkCRC32: false });
  } catch {
    throw wrong('a damaged or incomplete ZIP archive');
  }
  if (!zip.file('ppt/presentation.xml')) throw wrong('a ZIP archive without ppt/presentation.xml');
}

/**
 * POST /extract-flowchart: check the document (contract, then its bytes), hold the credits, hand
 * the document to the extract pool over RabbitMQ request/reply with a deadline, store the
 * flowchart project it answers with (project.created), then capture the credits. Anything that
 * delivers no project (a refusal by the pool: unreadable_document, no_text_found; a pool error;
 * the deadline: 504 timeout; an unreachable pool: 503) releases them: nothing is charged.
 */
export function createExtractService(rt: Pick<Runtime, 'amqp' | 'credits' | 'config' | 'db' | 'log'>) {
  const { config, credits } = rt;
  const projects = createProjectsService(rt);
  const labels = { pool: 'extract', operation: 'extract_flowchart' };

  /** Ask the pool; a reply that is not a flowchart, an error, a timeout or no pool throws. */
  const callPool = async (payload: ExtractRpcRequest): Promise<ExtractRpcReply> => {
    const started = performance.now();
    let reply;
    try {
      reply = await rt.amqp.rpc<unknown>('extract', payload, config.EXTRACT_RPC_TIMEOUT_MS);
    } catch (err) {
      const timeout = err instanceof RpcTimeoutError;
      metrics.rpcCalls.inc({ ...labels, outcome: timeout ? 'timeout' : 'unavailable' });
      throw timeout
        ? new AppError('timeout', `the extract pool did not answer within ${config.EXTRACT_RPC_TIMEOUT_MS} ms; nothing was charged`, { cause: err })
        : new AppError('service_unavailable', 'the extract pool is unreachable; nothing was charged', { cause: err });
    }
    metrics.rpcDuration.observe(labels, (performance.now() - started) / 1000);
    metrics.rpcCalls.inc({ ...labels, outcome: reply.ok ? 'ok' : 'refused' });
    if (!reply.ok) {
      const code = (reply.error.code in ERROR_STATUS ? reply.error.code : 'internal_error') as ErrorCode;
      throw new AppError(code, reply.error.message);
    }
    const parsed = ExtractRpcReply.safeParse(reply.result);
    if (!parsed.success) throw new AppError('internal_error', 'the extract pool answered with something that is not a flowchart');
    return parsed.data;
  };

  const describe = (r: ExtractionReport, fileName: string | undefined) =>
    `Extracted from ${fileName ? `"${fileName}"` : KIND_NAME[r.mimeType]} by ${r.engine} (${r.pages} ${r.mimeType === PPTX_MIME ? 'slide' : 'page'}${r.pages === 1 ? '' : 's'}).`;
  const answer = (doc: ProjectDoc, extraction: ExtractionReport, charged: number): ExtractFlowchartResult =>
    ({ ...projects.view(doc), extraction, charged }) as ExtractFlowchartResult;

  return {
    async extract(input: { accountId: string; requestId: string; request: ExtractFlowchartRequest; idFor: (prefix: string) => string; retry: boolean }): Promise<ExtractFlowchartResult> {
      const { accountId, request } = input;
      await checkDocumentType(request.documentBase64, request.mimeType);
      const projectId = input.idFor('prj');
      const payload: ExtractRpcRequest = { accountId, documentBase64: request.documentBase64, mimeType: request.mimeType, fileName: request.fileName ?? null };

      // A retry that took an Idempotency-Key over after a crash finds the project the first attempt
      // stored: extraction is deterministic, so read it again for the report and charge nothing.
      if (input.retry) {
        const existing = await projects.repository.findForAccount(accountId, projectId);
        if (existing) return answer(existing, (await callPool(payload)).extraction, 0);
      }

      const amount = credits.price('extract_flowchart');
      // A hold, not a plain debit: if this process dies while it waits, the scheduler gives it back.
      const hold = await credits.hold({ accountId, operation: 'extract_flowchart', amount, requestId: input.requestId, ttlMs: config.EXTRACT_RPC_TIMEOUT_MS + 30_000 });
      let doc: ProjectDoc;
      let reply: ExtractRpcReply | undefined;
      try {
        reply = await callPool(payload);
        const content = FlowchartContent.parse(reply.content);
        doc = await projects.create({ accountId, kind: 'flowchart', name: reply.title, description: describe(reply.extraction, request.fileName), content, idFor: () => projectId });
      } catch (err) {
        await credits.release(hold);
        const existing = (err as { code?: number }).code === 11000 ? await projects.repository.findForAccount(accountId, projectId) : null;
        // Two takeovers of one Idempotency-Key raced: the other stored the project and is charged.
        if (existing && reply) return answer(existing, reply.extraction, 0);
        throw err;
      }
      await credits.capture(hold);
      return answer(doc, reply.extraction, amount);
    },
  };
}
