import type JSZip from 'jszip';
import {
  ExtractRpcReply,
  PPTX_MIME,
  type ExtractFlowchartRequest,
  type ExtractFlowchartResult,
  type ExtractMimeType,
  type ExtractRpcRequest,
  type ExtractionReport,
} from '../../contracts/extract';
import { fromUnits } from '../credits/credits';
import { AppError } from '../infra/errors';
import { COLLECTIONS } from '../infra/mongo';
import type { ProjectDoc } from '../projects/projects.repository';
import type { Runtime } from '../runtime';
import { callPool, paidCall } from '../credits/paid-call';
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
  const wrong = (what: string) =>
    new AppError(
      'validation_error',
      `documentBase64: the bytes are ${what}, not ${KIND_NAME[declared]} as mimeType says`,
    );
  // Loaded by the first document rather than at the API's start.
  const { fileTypeFromBuffer } = await import('file-type');
  const found = await fileTypeFromBuffer(Buffer.from(documentBase64.slice(0, SNIFF_CHARS), 'base64'));
  if (declared !== PPTX_MIME) {
    if (found?.mime !== declared) throw wrong(found ? `${found.mime} (.${found.ext})` : 'of no recognised type');
    return;
  }
  if (!found || (found.ext !== 'zip' && found.mime !== PPTX_MIME))
    throw wrong(found ? `${found.mime} (.${found.ext})` : 'of no recognised type');
  let zip: JSZip;
  try {
    const { default: Zip } = await import('jszip');
    zip = await Zip.loadAsync(Buffer.from(documentBase64, 'base64'), { checkCRC32: false });
  } catch {
    throw wrong('a damaged or incomplete ZIP archive');
  }
  if (!zip.file('ppt/presentation.xml')) throw wrong('a ZIP archive without ppt/presentation.xml');
}

/**
 * POST /extract-flowchart: check the document (contract, then its bytes), then a paid call to the
 * extract pool (platform/credits/paid-call.ts): hold the credits, hand the document over RabbitMQ
 * request/reply with a deadline, store the flowchart project it answers with (project.created),
 * capture. Anything that delivers no project (a refusal by the pool: unreadable_document,
 * no_text_found; a pool error; the deadline: 504 timeout; an unreachable pool: 503) releases
 * them: nothing is charged.
 *
 * Crashes: the project id and the hold id come from the request (`idFor`, so an Idempotency-Key
 * retry names the same ones), and the hold names the project as what it pays for. A crash after
 * the project was stored and before the capture leaves the hold pending: the retry finds the
 * project and captures it (answering `charged` with the price), or, without a retry, the
 * scheduler captures it once it expires because the project exists. Never a free project.
 */
export function createExtractService(rt: Pick<Runtime, 'amqp' | 'credits' | 'config' | 'store' | 'log'>) {
  const { config, credits } = rt;
  const projects = createProjectsService(rt);
  const pool = (payload: ExtractRpcRequest) => ({
    pool: 'extract' as const,
    operation: 'extract_flowchart',
    payload,
    timeoutMs: config.EXTRACT_RPC_TIMEOUT_MS,
  });

  /** The pool's answer as a flowchart; 500 when it is not one (nothing is stored, nothing charged). */
  const flowchartOf = (raw: unknown): ExtractRpcReply => {
    const parsed = ExtractRpcReply.safeParse(raw);
    if (!parsed.success)
      throw new AppError('internal_error', 'the extract pool answered with something that is not a flowchart');
    return parsed.data;
  };

  const describe = (r: ExtractionReport, fileName: string | undefined) =>
    `Extracted from ${fileName ? `"${fileName}"` : KIND_NAME[r.mimeType]} by ${r.engine} (${r.pages} ${r.mimeType === PPTX_MIME ? 'slide' : 'page'}${r.pages === 1 ? '' : 's'}).`;
  const answer = (doc: ProjectDoc, extraction: ExtractionReport, charged: number): ExtractFlowchartResult =>
    ({ ...projects.view(doc), extraction, charged: fromUnits(charged) }) as ExtractFlowchartResult;

  return {
    async extract(input: {
      accountId: string;
      requestId: string;
      request: ExtractFlowchartRequest;
      idFor: (prefix: string) => string;
      retry: boolean;
    }): Promise<ExtractFlowchartResult> {
      const { accountId, request } = input;
      await checkDocumentType(request.documentBase64, request.mimeType);
      const projectId = input.idFor('prj');
      const holdId = input.idFor('hold');
      const payload: ExtractRpcRequest = {
        accountId,
        documentBase64: request.documentBase64,
        mimeType: request.mimeType,
        fileName: request.fileName ?? null,
      };

      // A retry that took an Idempotency-Key over after a crash finds the project the first attempt
      // stored. Its hold is captured now if that attempt died before capturing it (charged here),
      // else it was captured already (charged 0 here). Extraction is deterministic: the report is
      // read again, free.
      if (input.retry) {
        const existing = await projects.repository.forAccount(accountId).get(projectId);
        if (existing) {
          const settled = await credits.settle(holdId);
          const { extraction } = flowchartOf(await callPool(rt, pool(payload)));
          return answer(
            existing,
            extraction,
            settled === 'captured' ? credits.millicreditsFor('extract_flowchart') : 0,
          );
        }
      }

      const { result, charged } = await paidCall(rt, {
        ...pool(payload),
        charge: 'extract_flowchart',
        accountId,
        requestId: input.requestId,
        holdId,
        deliveredBy: { collection: COLLECTIONS.projects, id: projectId },
        deliver: async (raw, guard) => {
          const reply = flowchartOf(raw);
          await guard();
          // Two takeovers of one Idempotency-Key racing both land here: create answers the stored project to the second.
          const doc = await projects.create({
            accountId,
            kind: 'flowchart',
            name: reply.title,
            description: describe(reply.extraction, request.fileName),
            content: reply.content,
            idFor: () => projectId,
          });
          return { doc, extraction: reply.extraction };
        },
      });
      return answer(result.doc, result.extraction, charged);
    },
  };
}
